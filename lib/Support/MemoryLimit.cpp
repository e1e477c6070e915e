//===- MemoryLimit.cpp - A memory bound that fails with a message ---------===//
//
// The message is formatted when the limit is installed: when the handler
// runs, allocating may be impossible, so it only write()s a fixed buffer.
//
//===----------------------------------------------------------------------===//
#include "loom/Support/MemoryLimit.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOM_HAS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LOOM_HAS_ASAN 1
#endif

using namespace llvm;

namespace loom {

static char OutOfMemoryMessage[512];
static size_t OutOfMemoryLength;

static void onOutOfMemory(void *, const char *, bool) {
  ssize_t Ignored = ::write(2, OutOfMemoryMessage, OutOfMemoryLength);
  (void)Ignored;
  std::_Exit(1);
}

uint64_t getPhysicalMemoryBytes() {
  long Pages = ::sysconf(_SC_PHYS_PAGES), PageSize = ::sysconf(_SC_PAGESIZE);
  if (Pages <= 0 || PageSize <= 0)
    return 0;
  return (uint64_t)Pages * (uint64_t)PageSize;
}

void installMemoryLimit(uint64_t Bytes, StringRef Tool) {
  std::string Msg;
  raw_string_ostream OS(Msg);
  OS << Tool << ": error: out of memory";
  bool Capped = false;
#ifndef LOOM_HAS_ASAN
  if (Bytes) {
    struct rlimit RL;
    if (::getrlimit(RLIMIT_DATA, &RL) == 0 &&
        (RL.rlim_max == RLIM_INFINITY || Bytes <= RL.rlim_max)) {
      RL.rlim_cur = Bytes;
      Capped = ::setrlimit(RLIMIT_DATA, &RL) == 0;
    }
  }
#endif
  if (Capped)
    OS << ": the run needs more than the "
       << format("%.1f", Bytes / (1024.0 * 1024 * 1024))
       << " GiB bound (--max-memory)";
  OS << "; the model, cluster or plan is too large to plan on this machine\n";
  OS.flush();
  OutOfMemoryLength = std::min(Msg.size(), sizeof(OutOfMemoryMessage));
  std::memcpy(OutOfMemoryMessage, Msg.data(), OutOfMemoryLength);
  install_bad_alloc_error_handler(onOutOfMemory);
}

} // namespace loom
