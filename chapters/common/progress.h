/* A long run's progress on stderr, so that no program is silent for more than a few seconds.
 *
 * A program names the stage it is in; while a run lasts, a thread prints every 2 s the line
 * "PROGRAM: STAGE (T s)", T the seconds since the start, until the program stops it, before its
 * report's last line or its error message. A run shorter than 2 s prints nothing. On when stderr
 * is a terminal or KVL_PROGRESS=1, off when KVL_PROGRESS=0; KVL_PROGRESS_SECONDS=S sets the 2 s
 * (S in (0, 3600]). stdout is never touched, so a report is the same whether progress shows or
 * not. One run per process: the state is the process's, as stderr is. */
#ifndef KVL_PROGRESS_H
#define KVL_PROGRESS_H

void kvl_progress_start(const char *program);

/* The stage the run is in now (formatted as printf). */
void kvl_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* No more lines: the thread stops (safe to call when it never started, and more than once). */
void kvl_progress_stop(void);

#endif
