// The central directory of a zip archive: each member's sizes, read before any member is, so
// that a checkpoint's records can be checked against what its pickle announces before LibTorch's
// reader inflates them (a 19.6 KB file whose record inflates to gigabytes, issue 45). Zip64 sizes
// are read too (torch.save writes them for large records). Plain C++.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mumoe::io {

struct ZipMember {
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint16_t method = 0;  ///< 0 stored, 8 deflated
};

/// Every member by its full name ("archive/data.pkl"). Throws FileError naming the file when
/// there is no end-of-central-directory record or the directory is cut short or malformed.
std::map<std::string, ZipMember> read_zip_directory(const std::string& path);

/// The members under the names LibTorch's reader gives them: without the archive's top folder
/// ("data.pkl" for "archive/data.pkl"); members outside any folder are left out.
std::map<std::string, ZipMember> records_by_name(const std::map<std::string, ZipMember>& directory);

}  // namespace mumoe::io
