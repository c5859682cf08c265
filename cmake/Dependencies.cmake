# Header-only helpers, with fallbacks for a GPU machine where only PyTorch's LibTorch exists.

# nlohmann/json: Debian's nlohmann-json3-dev; PyTorch wheels also ship nlohmann/json.hpp in
# their include directory, which the fallback finds.
find_package(nlohmann_json 3.2 QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(MUMOE_NLOHMANN_INCLUDE nlohmann/json.hpp HINTS ${TORCH_INCLUDE_DIRS} REQUIRED)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${MUMOE_NLOHMANN_INCLUDE})
endif()

# CLI11 (Debian's libcli11-dev) for the command-line tool.
find_path(MUMOE_CLI11_INCLUDE CLI/CLI.hpp)

# Warnings for our own targets only (torch headers are included as SYSTEM).
add_library(mumoe_warnings INTERFACE)
target_compile_options(mumoe_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
