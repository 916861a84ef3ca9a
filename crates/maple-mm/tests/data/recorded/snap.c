/* LD_PRELOAD library: copies /proc/self/maps to $MAPLE_SNAP_DIR/PID.start.maps
   when the program starts and to PID.end.maps when it exits normally. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void snap(const char *what) {
  const char *dir = getenv("MAPLE_SNAP_DIR");
  if (!dir) return;
  char path[512], buf[1 << 16];
  snprintf(path, sizeof path, "%s/%d.%s.maps", dir, (int)getpid(), what);
  int in = open("/proc/self/maps", O_RDONLY);
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0) write(out, buf, n);
  if (in >= 0) close(in);
  if (out >= 0) close(out);
}
__attribute__((constructor)) static void at_start(void) { snap("start"); }
__attribute__((destructor)) static void at_end(void) { snap("end"); }
