// Error types thrown by the mumoe core.
//
// The core throws; the boundaries (CLI main, GUI actions) catch and report. Every error that
// concerns a file carries the file's path so the message a user sees always names the file and
// what is wrong with it (in the style of llama.cpp's loaders: validate first, fail loudly).
#pragma once

#include <stdexcept>
#include <string>

namespace mumoe {

/// Base class for every error the core reports on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller asked for something inconsistent (bad shapes, bad configuration, bad option).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A file could not be read, or its content is invalid. what() is "PATH: PROBLEM".
class FileError : public Error {
 public:
  FileError(std::string path, const std::string& problem)
      : Error(path + ": " + problem), path_(std::move(path)), problem_(problem) {}
  const std::string& path() const noexcept { return path_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string path_;
  std::string problem_;
};

/// Writing a file failed; the previous content of the destination (if any) is untouched.
class WriteError : public FileError {
 public:
  using FileError::FileError;
};

/// Thrown by long operations when their progress callback asked them to stop.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
};

}  // namespace mumoe
