/*
 * The kernel's maple-tree benchmark loops, run on the kernel's own C code
 * built in userspace, for `maple report`'s kernel section.
 *
 * This file is ours; the tree is not. It is compiled inside a Linux source
 * tree (Debian's `linux-source` package, unpacked by `ci/kernel-c.sh`),
 * next to the kernel's userspace test shims (`tools/testing/shared`), and
 * includes the kernel's `lib/maple_tree.c` as those shims do -- but without
 * CONFIG_DEBUG_MAPLE_TREE, as a production kernel is built.
 *
 * Usage: kbench NAME LOOPS
 * Builds NAME's tree, runs LOOPS iterations of its loop, and prints the
 * loop's nanoseconds per iteration on stdout (for `for-each`, one
 * iteration is a walk over all 500 entries). NAME is one of the table
 * below, or `lookup:N` (random lookups among N ranges), `gap:SIZE:N` (the
 * lowest gap of SIZE among N ranges), `insert` or `erase` (LOOPS ranges
 * stored in random order into an empty gap tree, or erased from it in
 * another; per insert or erase); `nodes-random` prints instead the node
 * count of a gap tree after LOOPS ranges stored in random order (and its
 * leaf count on stderr with KBENCH_LEAVES set).
 * The loop bodies and data are those of the kernel's benchmarks
 * (`BENCH_*` in lib/test_maple_tree.c) and of the report's Rust side.
 */
#define CONFIG_MAPLE_SEARCH
#define MAPLE_32BIT (MAPLE_NODE_SLOTS > 31)
#include "shared.h"
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "linux/init.h"

#include "../../../lib/maple_tree.c"

/* The 64-bit layout, as a kernel for this machine has it (see ci/kernel-c.sh). */
_Static_assert(sizeof(struct maple_node) == 256 && MAPLE_RANGE64_SLOTS == 16,
	       "the kernel's maple tree was built with its 32-bit node layout");

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* `[i, i + 5]` for i = 0, 10, ..., up to `top`, as the report's trees. */
static void fill(struct maple_tree *mt, unsigned long top)
{
	unsigned long i;

	for (i = 0; i <= top; i += 10)
		mtree_store_range(mt, i, i + 5, xa_mk_value(i), GFP_KERNEL);
}

/* Keeps a value alive so that the compiler cannot drop a loop. */
static volatile unsigned long sink;

static double slot_store(struct maple_tree *mt, long loops)
{
	double t;
	long i;

	fill(mt, 1030);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		mtree_store_range(mt, 105, 105, NULL, GFP_KERNEL);
		mtree_store_range(mt, 100, 105, xa_mk_value(100), GFP_KERNEL);
	}
	return (now_ns() - t) / loops;
}

static double node_store(struct maple_tree *mt, long loops)
{
	unsigned long ow = 76;
	double t;
	long i;

	fill(mt, 230);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		mtree_store_range(mt, ow, ow + 15, xa_mk_value(ow), GFP_KERNEL);
		ow += 5;
		if (ow > 135)
			ow = 76;
	}
	return (now_ns() - t) / loops;
}

static double gap_walk(struct maple_tree *mt, long loops)
{
	MA_STATE(mas, mt, 1470, 1470);
	unsigned long s = 0;
	double t;
	long i;

	fill(mt, 2490);
	mtree_store_range(mt, 1470, 1475, NULL, GFP_KERNEL);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		if (!mas_empty_area_rev(&mas, 0, 2000, 10))
			s += mas.index;
		mas_reset(&mas);
	}
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

static double load(struct maple_tree *mt, long loops)
{
	unsigned long s = 0;
	double t;
	long i;

	fill(mt, 2490);
	mtree_store_range(mt, 1470, 1475, NULL, GFP_KERNEL);
	t = now_ns();
	for (i = 0; i < loops; i++)
		s += xa_to_value(mtree_load(mt, 1480));
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

static double for_each(struct maple_tree *mt, long loops)
{
	unsigned long index, s = 0;
	void *entry;
	double t;
	long i;

	for (i = 0; i < 500; i++)
		mtree_store_range(mt, i * 5, i * 5 + 4, xa_mk_value(i), GFP_KERNEL);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		index = 0;
		mt_for_each(mt, entry, index, ULONG_MAX)
			s += xa_to_value(entry);
	}
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

/* The `[i, i + 4]` / `[i, i + 3]` tree of BENCH_MAS_PREV: 500 entries. */
static void fill_prev(struct maple_tree *mt)
{
	unsigned long i;

	for (i = 0; i < 2500; i += 5)
		mtree_store_range(mt, i, i + (i % 30 == 0 ? 3 : 4), xa_mk_value(i), GFP_KERNEL);
}

static double prev(struct maple_tree *mt, long loops)
{
	MA_STATE(mas, mt, 0, 0);
	unsigned long s = 0;
	void *entry;
	double t;
	long i;

	fill_prev(mt);
	t = now_ns();
	rcu_read_lock();
	for (i = 0; i < loops; i++) {
		mas_set(&mas, ULONG_MAX);
		while ((entry = mas_prev(&mas, 0)) != NULL)
			s += xa_to_value(entry);
	}
	rcu_read_unlock();
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

/* BENCH_MAS_FOR_EACH's loop: a read cursor stepped forward over the same tree. */
static double mas_each(struct maple_tree *mt, long loops)
{
	MA_STATE(mas, mt, 0, 0);
	unsigned long s = 0;
	void *entry;
	double t;
	long i;

	fill_prev(mt);
	t = now_ns();
	rcu_read_lock();
	for (i = 0; i < loops; i++) {
		mas_for_each(&mas, entry, ULONG_MAX)
			s += xa_to_value(entry);
		mas_set(&mas, 0);
	}
	rcu_read_unlock();
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

/* The seed's 135-entry tree, `[i * 10, i * 10 + 5]`, as BENCH_FORK builds it. */
static void fill_seed(struct maple_tree *mt)
{
	unsigned long i;

	for (i = 0; i <= 134; i++)
		mtree_store_range(mt, i * 10, i * 10 + 5, xa_mk_value(i), GFP_KERNEL);
}

/*
 * BENCH_FORK's loop: the tree duplicated (`__mt_dup`), every entry of the
 * copy stored again through its cursor, the copy destroyed. (The kernel's
 * loop also takes the copy's external lock, which has no cost here, and
 * validates the copy, which is a no-op without CONFIG_DEBUG_MAPLE_TREE.)
 */
static double fork_cursor(struct maple_tree *mt, long loops)
{
	struct maple_tree newmt;
	MA_STATE(newmas, &newmt, 0, 0);
	void *val;
	double t;
	long i;

	fill_seed(mt);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		mt_init_flags(&newmt, MT_FLAGS_ALLOC_RANGE);
		if (__mt_dup(mt, &newmt, GFP_KERNEL))
			abort();
		mas_set(&newmas, 0);
		mas_for_each(&newmas, val, ULONG_MAX)
			mas_store(&newmas, val);
		mas_destroy(&newmas);
		__mt_destroy(&newmt);
	}
	return (now_ns() - t) / loops;
}

/* The duplication alone: `__mt_dup`, then `__mt_destroy`. */
static double dup_destroy(struct maple_tree *mt, long loops)
{
	struct maple_tree newmt;
	double t;
	long i;

	fill_seed(mt);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		mt_init_flags(&newmt, MT_FLAGS_ALLOC_RANGE);
		if (__mt_dup(mt, &newmt, GFP_KERNEL))
			abort();
		__mt_destroy(&newmt);
	}
	return (now_ns() - t) / loops;
}

/* A fixed sequence of keys, the same as the report's Rust side draws. */
static unsigned long splitmix64(unsigned long *state)
{
	unsigned long z = (*state += 0x9e3779b97f4a7c15UL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
	return z ^ (z >> 31);
}

/* `[i * 16, i * 16 + 9]` for i < n, stored in ascending order. */
static void fill16(struct maple_tree *mt, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		mtree_store_range(mt, i * 16, i * 16 + 9, xa_mk_value(i), GFP_KERNEL);
}

/* Lookups of keys drawn at random below n * 16, in a plain tree. */
static double lookups(struct maple_tree *mt, long loops, unsigned long n)
{
	unsigned long state = 1, s = 0;
	double t;
	long i;

	fill16(mt, n);
	t = now_ns();
	for (i = 0; i < loops; i++)
		s += xa_to_value(mtree_load(mt, splitmix64(&state) % (n * 16)));
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

/* The lowest gap of `size` in the whole index space of n ranges. */
static double lowest_gap(struct maple_tree *mt, long loops, unsigned long size, unsigned long n)
{
	MA_STATE(mas, mt, 0, 0);
	unsigned long s = 0;
	double t;
	long i;

	fill16(mt, n);
	t = now_ns();
	for (i = 0; i < loops; i++) {
		if (!mas_empty_area(&mas, 0, ULONG_MAX, size))
			s += mas.index;
		mas_reset(&mas);
	}
	t = (now_ns() - t) / loops;
	sink = s;
	return t;
}

/*
 * `0..n` in the order a Fisher-Yates shuffle driven by splitmix64 seeded
 * with `seed` leaves them (as the report's Rust side shuffles); the
 * caller frees the array.
 */
static unsigned long *shuffled(unsigned long n, unsigned long seed)
{
	unsigned long *order = malloc(n * sizeof(*order));
	unsigned long i, j, k, state = seed;

	if (!order)
		abort();
	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = n - 1; i > 0; i--) {
		j = splitmix64(&state) % (i + 1);
		k = order[i];
		order[i] = order[j];
		order[j] = k;
	}
	return order;
}

/*
 * Stores ranges `[k * 16, k * 16 + 9]` for k < n in the shuffled order
 * (seed 7) into the empty tree: nanoseconds per insert.
 */
static double inserts(struct maple_tree *mt, unsigned long n)
{
	unsigned long *order = shuffled(n, 7);
	unsigned long i;
	double t;

	t = now_ns();
	for (i = 0; i < n; i++)
		mtree_store_range(mt, order[i] * 16, order[i] * 16 + 9, xa_mk_value(order[i]), GFP_KERNEL);
	t = (now_ns() - t) / n;
	free(order);
	return t;
}

/*
 * The tree of `inserts` (not timed), then each range erased by its first
 * index in another shuffled order (seed 8): nanoseconds per erase.
 */
static double erases(struct maple_tree *mt, unsigned long n)
{
	unsigned long *order;
	unsigned long i;
	double t;

	inserts(mt, n);
	order = shuffled(n, 8);
	t = now_ns();
	for (i = 0; i < n; i++)
		mtree_erase(mt, order[i] * 16);
	t = (now_ns() - t) / n;
	free(order);
	return t;
}

/*
 * Nodes of a gap tree after n ranges `[k * 16, k * 16 + 9]` are stored in
 * a random order (the order of `inserts`): the nodes the allocator handed
 * out and the tree kept.
 */
static unsigned long nodes_after_random(struct maple_tree *mt, unsigned long n)
{
	inserts(mt, n);
	if (getenv("KBENCH_LEAVES")) {
		MA_STATE(mas, mt, 0, 0);
		void *entry, *last = NULL;
		unsigned long leaves = 0;

		mas_for_each(&mas, entry, ULONG_MAX) {
			if (mas.node != last) {
				leaves++;
				last = mas.node;
			}
		}
		fprintf(stderr, "leaves %lu\n", leaves);
	}
	return kmem_cache_nr_allocated(maple_node_cache);
}

static const struct {
	const char *name;
	double (*run)(struct maple_tree *mt, long loops);
	unsigned int flags;
} benches[] = {
	{ "slot-store", slot_store, MT_FLAGS_ALLOC_RANGE },
	{ "node-store", node_store, MT_FLAGS_ALLOC_RANGE },
	{ "gap-walk", gap_walk, MT_FLAGS_ALLOC_RANGE },
	{ "load", load, MT_FLAGS_ALLOC_RANGE },
	{ "for-each", for_each, MT_FLAGS_ALLOC_RANGE },
	{ "prev", prev, MT_FLAGS_ALLOC_RANGE },
	{ "next", mas_each, MT_FLAGS_ALLOC_RANGE },
	{ "fork", fork_cursor, MT_FLAGS_ALLOC_RANGE },
	{ "dup", dup_destroy, MT_FLAGS_ALLOC_RANGE },
};

int main(int argc, char **argv)
{
	struct maple_tree tree;
	long loops;
	size_t b;

	unsigned long n, size;

	if (argc != 3 || (loops = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: kbench NAME LOOPS\n");
		return 2;
	}
	maple_tree_init();
	rcu_register_thread();
	/* The loops with a size in their name. */
	if (sscanf(argv[1], "lookup:%lu", &n) == 1 && n > 0) {
		mt_init_flags(&tree, 0);
		printf("%.3f\n", lookups(&tree, loops, n));
		return 0;
	}
	if (sscanf(argv[1], "gap:%lu:%lu", &size, &n) == 2 && size > 0 && n > 0) {
		mt_init_flags(&tree, MT_FLAGS_ALLOC_RANGE);
		printf("%.3f\n", lowest_gap(&tree, loops, size, n));
		return 0;
	}
	/* Random inserts or erases of LOOPS ranges (one tree). */
	if (!strcmp(argv[1], "insert") || !strcmp(argv[1], "erase")) {
		mt_init_flags(&tree, MT_FLAGS_ALLOC_RANGE);
		printf("%.3f\n", argv[1][0] == 'i' ? inserts(&tree, loops) : erases(&tree, loops));
		return 0;
	}
	if (!strcmp(argv[1], "nodes-random")) {
		mt_init_flags(&tree, MT_FLAGS_ALLOC_RANGE);
		printf("%lu\n", nodes_after_random(&tree, loops));
		return 0;
	}
	for (b = 0; b < sizeof(benches) / sizeof(benches[0]); b++) {
		if (strcmp(argv[1], benches[b].name))
			continue;
		mt_init_flags(&tree, benches[b].flags);
		printf("%.3f\n", benches[b].run(&tree, loops));
		mtree_destroy(&tree);
		rcu_unregister_thread();
		return 0;
	}
	fprintf(stderr, "kbench: unknown benchmark %s\n", argv[1]);
	return 2;
}
