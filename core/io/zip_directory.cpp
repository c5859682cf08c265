#include "io/zip_directory.h"

#include <cstring>
#include <fstream>
#include <vector>

#include "io/errors.h"

namespace mumoe::io {
namespace {

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const unsigned char* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint64_t le64(const unsigned char* p) { return uint64_t{le32(p)} | (uint64_t{le32(p + 4)} << 32); }

}  // namespace

std::map<std::string, ZipMember> read_zip_directory(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot be read");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  auto damaged = [&](const std::string& what) { return FileError(path, "damaged zip archive: " + what); };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65,535.
  const uint64_t tail = std::min<uint64_t>(file_size, 22 + 65535);
  std::vector<unsigned char> end(tail);
  in.seekg(static_cast<std::streamoff>(file_size - tail));
  in.read(reinterpret_cast<char*>(end.data()), static_cast<std::streamsize>(tail));
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i)
    if (le32(&end[static_cast<size_t>(i)]) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd < 0) throw damaged("no end-of-central-directory record");
  const unsigned char* e = &end[static_cast<size_t>(eocd)];
  uint64_t entries = le16(e + 10), dir_size = le32(e + 12), dir_offset = le32(e + 16);
  if (entries == 0xFFFF || dir_size == 0xFFFFFFFFu || dir_offset == 0xFFFFFFFFu) {
    // Zip64: its locator sits just before the end record and points to the zip64 end record.
    if (eocd < 20 || le32(e - 20) != 0x07064b50) throw damaged("zip64 sizes without a zip64 locator");
    const uint64_t z64 = le64(e - 20 + 8);
    unsigned char rec[56];
    in.seekg(static_cast<std::streamoff>(z64));
    if (z64 + 56 > file_size || !in.read(reinterpret_cast<char*>(rec), 56) || le32(rec) != 0x06064b50)
      throw damaged("the zip64 end record is missing");
    entries = le64(rec + 32);
    dir_size = le64(rec + 40);
    dir_offset = le64(rec + 48);
  }
  if (dir_offset > file_size || dir_size > file_size - dir_offset) throw damaged("the central directory lies outside the file");
  if (entries > dir_size / 46) throw damaged("more members than the central directory can hold");
  std::vector<unsigned char> dir(dir_size);
  in.seekg(static_cast<std::streamoff>(dir_offset));
  if (!in.read(reinterpret_cast<char*>(dir.data()), static_cast<std::streamsize>(dir_size)))
    throw damaged("the central directory is cut short");
  std::map<std::string, ZipMember> out;
  size_t pos = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    if (pos + 46 > dir.size() || le32(&dir[pos]) != 0x02014b50) throw damaged("a central directory entry is malformed");
    const unsigned char* h = &dir[pos];
    ZipMember m;
    m.method = le16(h + 10);
    m.compressed_size = le32(h + 20);
    m.uncompressed_size = le32(h + 24);
    const size_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
    if (pos + 46 + name_len + extra_len + comment_len > dir.size()) throw damaged("a central directory entry is cut short");
    std::string name(reinterpret_cast<const char*>(h + 46), name_len);
    // Zip64 extended information: the sizes that are 0xFFFFFFFF above, in this order.
    for (size_t x = pos + 46 + name_len; x + 4 <= pos + 46 + name_len + extra_len;) {
      const uint16_t id = le16(&dir[x]), size = le16(&dir[x + 2]);
      if (x + 4 + size > pos + 46 + name_len + extra_len) break;
      if (id == 0x0001) {
        size_t f = x + 4;
        if (m.uncompressed_size == 0xFFFFFFFFu && f + 8 <= x + 4 + size) m.uncompressed_size = le64(&dir[f]), f += 8;
        if (m.compressed_size == 0xFFFFFFFFu && f + 8 <= x + 4 + size) m.compressed_size = le64(&dir[f]);
      }
      x += 4 + size;
    }
    out[name] = m;
    pos += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

std::map<std::string, ZipMember> records_by_name(const std::map<std::string, ZipMember>& directory) {
  std::map<std::string, ZipMember> out;
  for (const auto& [name, member] : directory) {
    const auto slash = name.find('/');
    if (slash != std::string::npos) out[name.substr(slash + 1)] = member;
  }
  return out;
}

}  // namespace mumoe::io
