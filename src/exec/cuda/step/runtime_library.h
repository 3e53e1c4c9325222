// A shared library opened when it is first needed rather than when the program starts: a
// CPU-only run of kvforge never loads NVIDIA's large libraries (cuBLASLt's initializers alone
// cost a third of a second a process), and a machine without them starts and is refused by
// name only where it asks for them. Opened once, never closed. Plain C++: no CUDA headers.
#pragma once

#include <string>
#include <type_traits>

namespace kvf::exec::cuda::step {

class RuntimeLibrary {
 public:
  explicit RuntimeLibrary(const char* soname);

  // Points `fn` at the entry point `name`; the first one missing is kept as error().
  template <typename Fn>
  void resolve(Fn& fn, const char* name) {
    static_assert(std::is_pointer_v<Fn>);
    fn = reinterpret_cast<Fn>(symbol(name));
  }

  // Empty while the library opened and every resolved name was found.
  const std::string& error() const { return error_; }

 private:
  void* symbol(const char* name);

  std::string soname_;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace kvf::exec::cuda::step
