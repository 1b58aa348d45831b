// Setup for tstat's own background threads (pipeline writer and collector,
// capture thread, in-process rules): a name that `top -H`, perf and gdb show,
// and for the pipeline's and the capture thread a lower scheduling priority,
// so that they use spare CPU time and do not delay the training thread,
// torch's workers or the capture's OpenMP workers (a worker preempted by the
// writer holds the whole team at its barrier).
#pragma once

namespace tstat::host {

// Niceness added to the process's for background threads: at +10 a runnable
// training or reduction thread gets most of a contended core. Work is never
// lost to it: when the writer falls behind, EndStep waits for queue space
// (and sleeps), which gives the writer the core.
inline constexpr int kBackgroundNiceIncrement = 10;

// Names the calling thread (at most 15 characters are kept).
void NameCurrentThread(const char* name);

// Lowers the calling thread's priority by kBackgroundNiceIncrement (up to
// nice 19). Best effort: where setpriority is refused the thread keeps its
// priority. Not for threads the training thread waits on step by step (the
// in-process rules thread).
void LowerCurrentThreadPriority();

// The processors this process may run on (its affinity mask; not
// OMP_NUM_THREADS, which sizes OpenMP's teams, not tstat's own threads): a
// thread beside the training thread needs a second one.
int UsableProcessors();

}  // namespace tstat::host
