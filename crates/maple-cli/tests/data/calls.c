/* Every memory call of Linux 6.18 and its flags, once or twice each, for
 * `maple trace --verify` to check the model against the kernel after
 * every call. Results are not checked here: a call the kernel refuses
 * must be refused by the model too. Usage: calls DIR (a scratch folder). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096
#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_UNINITIALIZED
#define MAP_UNINITIALIZED 0x4000000
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef SHM_EXEC
#define SHM_EXEC 0100000
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)
#define RW (PROT_READ | PROT_WRITE)

static char *map(size_t pages, int prot, int flags) {
    char *p = mmap(0, pages * PG, prot, flags, -1, 0);
    return p == MAP_FAILED ? 0 : p;
}

static void mmap_flags(const char *dir) {
    char *p;
    /* Droppable memory (6.11): anonymous only. */
    p = map(4, RW, MAP_DROPPABLE | MAP_ANONYMOUS);
    if (p) { p[0] = 1; munmap(p, 4 * PG); }
    mmap(0, PG, RW, MAP_DROPPABLE, -1, 0); /* EINVAL: not anonymous */
    /* FIXED_NOREPLACE: over a hole, then over itself. */
    p = map(8, RW, ANON);
    munmap(p + 4 * PG, 4 * PG);
    mmap(p + 4 * PG, 2 * PG, RW, ANON | MAP_FIXED_NOREPLACE, -1, 0);
    mmap(p, 2 * PG, RW, ANON | MAP_FIXED_NOREPLACE, -1, 0); /* EEXIST */
    munmap(p, 8 * PG);
    /* Stacks. */
    p = map(4, RW, ANON | MAP_GROWSDOWN);
    if (p) {
        mprotect(p + 2 * PG, PG, PROT_READ | PROT_GROWSDOWN);
        syscall(SYS_pkey_mprotect, p + 2 * PG, PG, RW | PROT_GROWSDOWN, -1);
        mprotect(p, PG, PROT_READ | PROT_GROWSUP); /* EINVAL on x86-64 */
        munmap(p, 4 * PG);
    }
    p = map(4, RW, ANON | MAP_STACK);
    munmap(p, 4 * PG);
    /* Low memory for 32-bit pointers (placed between 1 and 2 GiB). */
    p = map(2, RW, ANON | MAP_32BIT);
    char *low = map(2, RW, ANON | MAP_32BIT);
    if (p) munmap(p, 2 * PG);
    if (low) munmap(low, 2 * PG);
    /* MAP_SYNC needs a DAX file: EOPNOTSUPP on others, ignored without
     * MAP_SHARED_VALIDATE. */
    char path[4096];
    snprintf(path, sizeof path, "%s/file", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && ftruncate(fd, 8 * PG) == 0) {
        mmap(0, PG, RW, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
        p = mmap(0, PG, RW, MAP_SHARED | MAP_SYNC, fd, 0);
        if (p != MAP_FAILED) munmap(p, PG);
        mmap(0, PG, RW, MAP_SHARED_VALIDATE | 0x40000000, fd, 0); /* EOPNOTSUPP: unknown flag */
        /* Populate, noreserve, uninitialized. */
        p = mmap(0, 4 * PG, RW, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (p != MAP_FAILED) munmap(p, 4 * PG);
        close(fd);
    }
    p = map(4, RW, ANON | MAP_POPULATE);
    munmap(p, 4 * PG);
    p = map(4, RW, ANON | MAP_NORESERVE);
    char *q = map(4, RW, ANON);
    munmap(p, 4 * PG);
    munmap(q, 4 * PG);
    p = map(4, RW, ANON | MAP_UNINITIALIZED);
    munmap(p, 4 * PG);
    /* Huge pages of each size: none reserved here, so ENOMEM (or a
     * mapping where some are). */
    for (int shift = 0; shift <= 30; shift += 30) {
        int huge = shift ? (30 << MAP_HUGE_SHIFT) : 0;
        p = mmap(0, 2 << 20, RW, ANON | MAP_HUGETLB | huge, -1, 0);
        if (p != MAP_FAILED) munmap(p, 2 << 20);
    }
    mmap(0, 2 << 20, RW, ANON | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
    mmap(0, 2 << 20, RW, ANON | MAP_HUGETLB | (13 << MAP_HUGE_SHIFT), -1, 0); /* no such size */
}

static void remaps(void) {
    char *p = map(4, RW, ANON), *to = map(8, RW, ANON);
    p[0] = 1;
    /* FIXED over a mapping, then DONTUNMAP (the old range stays, empty). */
    char *q = mremap(p, 4 * PG, 4 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, to + 2 * PG);
    if (q != MAP_FAILED) {
        char *r = mremap(q, 4 * PG, 4 * PG, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, 0);
        if (r != MAP_FAILED) munmap(r, 4 * PG);
    }
    mremap(to, PG, 2 * PG, MREMAP_DONTUNMAP, 0); /* EINVAL: without MAYMOVE */
    mremap(to, PG, PG, 8, 0);                    /* EINVAL: unknown flag */
    munmap(to, 8 * PG);
}

static void advice(void) {
    static const int all[] = {
        MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DONTNEED, MADV_FREE, MADV_REMOVE,
        MADV_DONTFORK, MADV_DOFORK, MADV_MERGEABLE, MADV_UNMERGEABLE, MADV_HUGEPAGE, MADV_NOHUGEPAGE,
        MADV_DONTDUMP, MADV_DODUMP, MADV_WIPEONFORK, MADV_KEEPONFORK, 20 /* COLD */, 21 /* PAGEOUT */,
        22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */, 24 /* DONTNEED_LOCKED */, 25 /* COLLAPSE */,
        102 /* GUARD_INSTALL */, 103 /* GUARD_REMOVE */, 999 /* none */};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) {
        char *p = map(8, RW, ANON);
        p[0] = 1;
        madvise(p + 2 * PG, 2 * PG, all[i]);
        madvise(p, PG, all[i]);
        madvise(p + 2 * PG, 2 * PG, all[i] == MADV_DONTFORK ? MADV_DOFORK : all[i]);
        munmap(p, 8 * PG);
    }
    /* Guard pages, then removed. */
    char *p = map(8, RW, ANON);
    madvise(p + PG, 2 * PG, 102);
    madvise(p + PG, PG, 103);
    munmap(p, 8 * PG);
    /* process_madvise on this process (advice it allows: COLD, PAGEOUT,
     * WILLNEED, COLLAPSE; others EINVAL). */
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    p = map(8, RW, ANON);
    struct iovec v = {p, 4 * PG};
    if (pidfd >= 0) {
        syscall(440, pidfd, &v, 1, 20, 0);
        syscall(440, pidfd, &v, 1, MADV_WILLNEED, 0);
        syscall(440, pidfd, &v, 1, MADV_DONTFORK, 0);
        close(pidfd);
    }
    munmap(p, 8 * PG);
}

static void locks_and_seals(void) {
    char *p = map(8, RW, ANON);
    mlock(p, 2 * PG);
    syscall(SYS_mlock2, p + 4 * PG, 2 * PG, MLOCK_ONFAULT);
    syscall(SYS_mlock2, p, PG, 8); /* EINVAL */
    munlock(p, 8 * PG);
    mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
    char *q = map(2, RW, ANON);
    munlockall();
    mlockall(MCL_FUTURE);
    munlockall();
    munmap(q, 2 * PG);
    syscall(462, p + 6 * PG, 2 * PG, 0); /* mseal */
    syscall(462, p, PG, 1);              /* EINVAL: flags */
    munmap(p + 6 * PG, PG);              /* EPERM: sealed */
    munmap(p, 6 * PG);
}

static void shm(void) {
    int id = shmget(IPC_PRIVATE, 4 * PG, IPC_CREAT | 0600);
    if (id < 0) return;
    char *a = shmat(id, 0, 0);
    char *b = shmat(id, 0, SHM_RDONLY);
    char *c = shmat(id, 0, SHM_EXEC);
    char *hole = map(8, RW, ANON);
    char *d = shmat(id, hole + PG + 123, SHM_RND | SHM_REMAP);
    shmat(id, hole + PG + 123, 0);          /* EINVAL: not aligned */
    shmat(id, hole + 2 * PG, 0);            /* EINVAL: mapped, no REMAP */
    shmdt(a);
    shmdt(b);
    shmdt(c);
    if (d != (char *)-1) shmdt(d);
    shmdt(hole);                            /* EINVAL: no segment */
    munmap(hole, 8 * PG);
    shmctl(id, IPC_RMID, 0);
}

static void rest(void) {
    /* remap_file_pages (deprecated, emulated). */
    int fd = memfd_create("rfp", 0);
    if (fd >= 0 && ftruncate(fd, 8 * PG) == 0) {
        char *p = mmap(0, 8 * PG, RW, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            syscall(SYS_remap_file_pages, p + 2 * PG, 2 * PG, 0, 5, 0);
            syscall(SYS_remap_file_pages, p, PG, 0, 1, 0);
            munmap(p, 8 * PG);
        }
        /* memfd identity: shown with the shmem device and inode. */
        char *m = mmap(0, 4 * PG, RW, MAP_SHARED, fd, 0);
        char *n = mmap(0, 4 * PG, PROT_READ, MAP_PRIVATE, fd, PG);
        close(fd);
        if (m != MAP_FAILED) m[0] = 1;
        if (n != MAP_FAILED) munmap(n, 4 * PG);
        if (m != MAP_FAILED) munmap(m, 4 * PG);
    }
    /* brk. */
    void *b = sbrk(0);
    brk((char *)b + 3 * PG);
    brk((char *)b + PG);
    brk(b);
    /* Names. */
    char *p = map(4, RW, ANON);
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, 2 * PG, "name one");
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p + PG, 2 * PG, "name two");
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, 4 * PG, 0);
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, PG, "bad[name");
    munmap(p, 4 * PG);
}

static int child(void *arg) {
    (void)arg;
    char *p = map(2, RW, ANON);
    munmap(p, 2 * PG);
    _exit(0);
}

static void processes(char **argv) {
    pid_t c = fork();
    if (c == 0) { char *p = map(2, RW, ANON); munmap(p, PG); _exit(0); }
    waitpid(c, 0, 0);
    c = vfork();
    if (c == 0) _exit(0);
    waitpid(c, 0, 0);
    static char stack[64 * 1024];
    c = clone(child, stack + sizeof stack, SIGCHLD, 0);
    if (c > 0) waitpid(c, 0, 0);
    struct { unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls; } args = {0};
    args.exit_signal = SIGCHLD;
    c = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (c == 0) { char *p = map(2, RW, ANON); munmap(p, 2 * PG); _exit(0); }
    if (c > 0) waitpid(c, 0, 0);
    c = fork();
    if (c == 0) { execl(argv[0], argv[0], "--exec", (char *)0); _exit(1); }
    if (c > 0) waitpid(c, 0, 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--exec") == 0) {
        char *p = map(2, RW, ANON);
        munmap(p, 2 * PG);
        return 0;
    }
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    mmap_flags(dir);
    remaps();
    advice();
    locks_and_seals();
    shm();
    rest();
    processes(argv);
    puts("done");
    return 0;
}
