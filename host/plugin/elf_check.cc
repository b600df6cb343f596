#include "plugin/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace fleet {
namespace {

// Reads exactly n bytes at `offset`; false on a short read.
bool ReadAt(int fd, void* dst, size_t n, uint64_t offset) {
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// offset + size <= limit, without overflow.
bool Inside(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

}  // namespace

Status CheckElfImage(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return InvalidArgument("cannot open: " + std::string(std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return InvalidArgument("not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh{};
  if (!ReadAt(fd, &eh, sizeof(eh), 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return InvalidArgument("not an ELF file");
  }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr unsigned char kData = ELFDATA2LSB;
#else
  constexpr unsigned char kData = ELFDATA2MSB;
#endif
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != kData) {
    return InvalidArgument("an ELF file of another class or byte order than this machine's");
  }
  if (eh.e_type != ET_DYN) return InvalidArgument("an ELF file that is not a shared object");
  const std::string truncated = "truncated (" + std::to_string(size) + " bytes): ";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !Inside(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), size)) {
    return InvalidArgument(truncated + "its program headers lie past the end of the file");
  }
  if (eh.e_shnum > 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                         !Inside(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), size))) {
    return InvalidArgument(truncated + "its section headers lie past the end of the file");
  }
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!ReadAt(fd, &ph, sizeof(ph), eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr))) {
      return InvalidArgument(truncated + "cannot read program header " + std::to_string(i));
    }
    if (ph.p_type == PT_LOAD && !Inside(ph.p_offset, ph.p_filesz, size)) {
      return InvalidArgument(truncated + "loadable segment " + std::to_string(i) +
                             " ends at byte " + std::to_string(ph.p_offset + ph.p_filesz));
    }
  }
  return OkStatus();
}

}  // namespace fleet
