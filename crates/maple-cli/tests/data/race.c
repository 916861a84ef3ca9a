/* Threads that change one address space at once: each maps, protects,
 * moves and unmaps its own ranges and maps MAP_FIXED over an arena the
 * others map too, and now and then one forks. The kernel runs their
 * calls in some order; `maple trace --verify` checks the model applied
 * them in that order after every call.
 * Usage: race THREADS ROUNDS [OUT]: with OUT, the arena's bounds and the
 * process's final maps are written there. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARENA_PAGES 64
static char *arena;
static int rounds = 2000;

static void *worker(void *arg) {
    unsigned s = 12345u + (unsigned)(long)arg * 7919u;
    for (int i = 0; i < rounds; i++) {
        s = s * 1103515245u + 12345u;
        size_t len = 4096 * (i % 4 + 1);
        size_t off = 4096 * ((s >> 8) % (ARENA_PAGES - 4));
        char *p;
        switch ((s >> 16) % 6) {
        case 0:
            p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) munmap(p, len);
            break;
        case 1:
            p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                mprotect(p, 4096, PROT_READ);
                mprotect(p, 4096, PROT_READ | PROT_WRITE);
                munmap(p, len);
            }
            break;
        case 2:
            p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                char *q = mremap(p, len, len + 8192, MREMAP_MAYMOVE);
                munmap(q != MAP_FAILED ? q : p, q != MAP_FAILED ? len + 8192 : len);
            }
            break;
        case 3:
            mmap(arena + off, len, (s & 1) ? PROT_READ : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            break;
        case 4:
            mprotect(arena + off, len, (s & 2) ? PROT_READ : PROT_NONE);
            break;
        default:
            if (i % 50 == 0) {
                pid_t c = fork();
                if (c == 0) _exit(0);
                if (c > 0) waitpid(c, 0, 0);
            } else {
                munmap(arena + off, 4096);
            }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) rounds = atoi(argv[2]);
    if (n < 1 || n > 64) return 2;
    arena = mmap(0, ARENA_PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_t t[64];
    for (long i = 0; i < n; i++) pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    if (argc > 3) {
        FILE *out = fopen(argv[3], "w"), *maps = fopen("/proc/self/maps", "r");
        if (!out || !maps) return 1;
        fprintf(out, "arena %lx %lx\n", (unsigned long)arena, (unsigned long)(arena + ARENA_PAGES * 4096));
        char line[4096];
        while (fgets(line, sizeof line, maps)) fputs(line, out);
        fclose(maps);
        fclose(out);
    }
    return 0;
}
