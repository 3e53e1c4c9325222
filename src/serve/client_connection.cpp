#include "serve/client_connection.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvf::serve {
namespace {

// The numeric host and port of a socket address (getnameinfo, as the library formats them).
bool host_and_port(const sockaddr_storage& sa, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, h, sizeof h, s, sizeof s, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = h;
  port = std::atoi(s);
  return true;
}

bool matches(int fd, const ConnectionAddresses& a) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;  // not connected: a listening socket, say
  }
  std::string local_host, peer_host;
  int local_port = -1, peer_port = -1;
  return host_and_port(local, local_len, local_host, local_port) && host_and_port(peer, peer_len, peer_host, peer_port) &&
         local_port == a.local_port && peer_port == a.remote_port && local_host == a.local_addr &&
         peer_host == a.remote_addr;
}

}  // namespace

ClientConnection ClientConnection::find(const ConnectionAddresses& a) {
  ClientConnection c;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (*end == '\0' && matches(static_cast<int>(fd), a)) {
      c.fd_ = static_cast<int>(fd);
      break;
    }
  }
  return c;
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  char b;
  const ssize_t n = recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;  // the client's FIN
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace kvf::serve
