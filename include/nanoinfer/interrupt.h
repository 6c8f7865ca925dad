// Stopping a long command cleanly on Ctrl-C, SIGTERM or a hang-up, for the commands that
// write large outputs (quantize). Implemented with the signal-time cleanup of temporary files
// (src/base/output_files.h: RemoveOnSignal), which owns the handlers.
#pragma once

namespace nanoinfer {

// While an instance lives, the first SIGINT, SIGTERM or SIGHUP only records that the user asked
// to stop (interrupted() returns the signal): the command stops at its next check and its
// objects clean up as they unwind. A second signal, or one that arrives when no instance
// lives, removes every registered path at once and ends the process (RemoveOnSignal): a
// second Ctrl-C or a hang-up never leaves a temporary file or directory behind.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  static int interrupted();  // 0, or the signal that asked to stop
};

}  // namespace nanoinfer
