/* System V shared memory, attached and detached the ways programs do:
   maps snapshots taken by the program itself, before and after. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

static void snapshot(const char *name) {
    char buf[65536];
    int in = open("/proc/self/maps", O_RDONLY);
    int out = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) write(out, buf, n);
    close(in);
    close(out);
}

int main(void) {
    snapshot("sysv.start.maps");
    int a = shmget(IPC_PRIVATE, 3 * 4096 + 100, IPC_CREAT | 0600);
    int b = shmget(IPC_PRIVATE, 8 * 4096, IPC_CREAT | 0600);
    /* An image buffer, as X11's MIT-SHM makes: attached where the kernel
       chooses, read-write and read-only. */
    char *p = shmat(a, NULL, 0);
    char *q = shmat(a, NULL, SHM_RDONLY);
    memset(p, 1, 4096);
    /* One attached over a reserved region, and cut by mprotect and munmap. */
    char *r = mmap(NULL, 16 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *s = shmat(b, r + 4 * 4096, SHM_REMAP);
    mprotect(s + 2 * 4096, 2 * 4096, PROT_READ);
    munmap(s, 4096);
    /* A detach at an address with nothing attached fails. */
    shmdt(s);
    shmdt(s - 4096);
    shmdt(q);
    shmctl(a, IPC_RMID, NULL);
    shmctl(b, IPC_RMID, NULL);
    snapshot("sysv.end.maps");
    shmdt(p);
    return 0;
}
