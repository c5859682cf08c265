// The output guard and its temporary files (io/output_files.h, io/json_file.h), issue 45: the
// parts a CLI run cannot show deterministically — a signal arriving while a temporary exists —
// and the rules themselves, on real files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "io/atomic_file.h"
#include "io/errors.h"
#include "io/json_file.h"
#include "io/output_files.h"
#include "temp_dir.h"

using namespace mumoe;
namespace fs = std::filesystem;

namespace {

bool temporaries_in(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(io::kTemporaryInfix) != std::string::npos) return true;
  return false;
}

// A child process makes a temporary (an atomic write in progress) and is ended by each catchable
// signal: the temporary is gone and the child died of that signal, as it would have without us.
TEST(OutputFiles, ASignalRemovesTheTemporariesOfWritesInProgress) {
  for (const int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) {
    testkit::TempDir dir;
    const auto destination = dir.file("model.safetensors");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      io::install_temporary_cleanup();
      io::AtomicFileWriter writer(destination);
      writer.write("partial", 7);
      ::raise(signal_number);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status)) << signal_number;
    if (WIFSIGNALED(status)) {
      EXPECT_EQ(WTERMSIG(status), signal_number);
    }
    EXPECT_FALSE(temporaries_in(dir.path())) << "signal " << signal_number;
    EXPECT_FALSE(fs::exists(destination));
  }
}

// A temporary whose process is gone is swept; one of a running process (ours, init's) is not,
// nor a file that only resembles the pattern.
TEST(OutputFiles, OnlyTemporariesOfProcessesThatAreGoneAreSwept) {
  testkit::TempDir dir;
  const auto destination = dir.file("out.bin");
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const auto stale = destination + io::kTemporaryInfix + std::to_string(gone) + "-aB3dE9";
  const auto stale_companion = stale + ".mumoe.json";
  const auto ours = destination + io::kTemporaryInfix + std::to_string(::getpid()) + "-aB3dE9";
  const auto inits = destination + io::kTemporaryInfix + "1-aB3dE9";
  const auto lookalike = destination + io::kTemporaryInfix + "notapid";
  const auto other = dir.file("other.bin") + io::kTemporaryInfix + std::to_string(gone) + "-aB3dE9";
  for (const auto& f : {stale, stale_companion, ours, inits, lookalike, other}) {
    std::FILE* fp = std::fopen(f.c_str(), "w");
    ASSERT_NE(fp, nullptr);
    std::fclose(fp);
  }
  EXPECT_EQ(io::sweep_stale_temporaries(destination), 2);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_companion));
  for (const auto& f : {ours, inits, lookalike, other}) EXPECT_TRUE(fs::exists(f)) << f;
}

TEST(OutputFiles, OutputsAreRegularFilesDistinctFromInputsAndFromEachOther) {
  testkit::TempDir dir;
  const auto a = dir.file("a"), b = dir.file("b"), link = dir.file("link-to-a");
  std::FILE* fp = std::fopen(a.c_str(), "w");
  std::fclose(fp);
  fs::create_symlink(a, link);
  EXPECT_NO_THROW(io::check_outputs({{a, "--output"}, {b, "--edits-out"}}, {{dir.file("input"), "the model"}}));
  EXPECT_THROW(io::check_outputs({{b, "--output"}, {b, "--edits-out"}}), UsageError);  // neither exists yet
  EXPECT_THROW(io::check_outputs({{a, "--output"}, {link, "--edits-out"}}), UsageError);
  EXPECT_THROW(io::check_outputs({{link, "--output"}}, {{a, "the model"}}), UsageError);
  EXPECT_THROW(io::check_outputs({{dir.path().string(), "--output"}}), FileError);
  const auto fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(io::check_outputs({{fifo, "--output"}}), FileError);
  EXPECT_THROW(io::AtomicFileWriter{fifo}, FileError);
  EXPECT_FALSE(temporaries_in(dir.path()));
}

TEST(OutputFiles, AWriteThroughALinkReplacesItsTargetWithTheTargetsPermissions) {
  testkit::TempDir dir;
  const auto target = dir.file("target"), link = dir.file("link");
  std::FILE* fp = std::fopen(target.c_str(), "w");
  std::fclose(fp);
  ::chmod(target.c_str(), 0640);
  fs::create_symlink(target, link);
  io::AtomicFileWriter w(link);
  w.write("new", 3);
  w.commit();
  EXPECT_TRUE(fs::is_symlink(link));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(fs::file_size(target), 3u);
}

TEST(JsonFile, NestingIsBoundedBeforeParsingAndStringsDoNotCount) {
  EXPECT_EQ(io::json_nesting_depth(R"({"a": [1, {"b": "[[[[{{{{"}]})"), 3);
  EXPECT_EQ(io::json_nesting_depth(R"(["\"[[", "\\", [[]]])"), 3);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_GT(io::json_nesting_depth(deep), io::kMaxJsonDepth);
  EXPECT_THROW(io::parse_bounded_json(deep, "deep.json"), FileError);
  const std::string fine = std::string(io::kMaxJsonDepth, '[') + std::string(io::kMaxJsonDepth, ']');
  EXPECT_NO_THROW(io::parse_bounded_json(fine, "fine.json"));
  try {
    io::parse_bounded_json("{\"a\": ", "broken.json");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), "broken.json");
  }
}

}  // namespace
