// ClientConnection: the TCP socket a request came in on, found from the addresses the HTTP
// library records for it, so that a handler that waits (a non-streamed completion) can tell
// whether its client is still there. The HTTP library packaged by Debian (cpp-httplib 0.11)
// does not hand the socket to handlers; a stream notices a closed client when a write fails,
// a whole response writes nothing until the end.
#pragma once

#include <string>

namespace kvf::serve {

struct ConnectionAddresses {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

class ClientConnection {
 public:
  // The process's socket with these addresses (numeric hosts, as the library writes them);
  // none found: a connection that never reports closed.
  static ClientConnection find(const ConnectionAddresses& a);

  bool found() const { return fd_ >= 0; }
  // Whether the client has closed its side (or reset it). Reads nothing: data the client
  // has sent since (a pipelined request) stays for the library.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace kvf::serve
