#include "spmd/runtime/small_text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "spmd/runtime/error.hpp"

namespace spmd::runtime {

std::string read_small_text_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                                 const std::string& content) {
  // O_NONBLOCK: open() of a FIFO with no writer would wait forever; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EISDIR) throw Error(what + " is a directory, not a file: " + content);
    throw Error(what + ": cannot read it (" + std::strerror(errno) + ")");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw Error(what + ": cannot stat it (" + std::strerror(errno) + ")");
  if (S_ISDIR(st.st_mode)) throw Error(what + " is a directory, not a file: " + content);
  if (!S_ISREG(st.st_mode))
    throw Error(what + " is not a regular file (" +
                (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket") +
                "): " + content);
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    throw Error(what + " is " + std::to_string(st.st_size) + " bytes; at most " + std::to_string(max_bytes) +
                " are read: " + content);
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(what + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) break;  // shrank since fstat: what is there
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace spmd::runtime
