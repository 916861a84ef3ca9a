/*
 * A lean slab for the kernel's maple tree in userspace (ours): the
 * `kmem_cache` calls `lib/maple_tree.c` makes, served from a free list of
 * fixed-size objects carved from aligned chunks, as the kernel's own slab
 * serves them from per-CPU free lists. It replaces the test shims'
 * allocator (tools/testing/shared/linux.c), which takes a mutex and calls
 * posix_memalign/free for every aligned object, and fails allocations made
 * without __GFP_DIRECT_RECLAIM to exercise the tree's error paths: costs a
 * kernel does not pay, and the report compares loops, not allocators.
 *
 * Objects freed after an RCU grace period are freed on liburcu's callback
 * thread, so the list is guarded by a spin lock (one uncontended atomic
 * exchange a call). Chunks are never given back: the process is a short
 * benchmark run.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/gfp.h>
#include <linux/slab.h>

/* What the shims' headers and maple_tree.c expect to find defined. */
int nr_allocated;
int preempt_count;
int test_verbose;

/* Objects carved from one chunk. */
#define CHUNK_OBJS 64

struct kmem_cache {
	unsigned int size;
	unsigned int align;
	void (*ctor)(void *);
	void *free;
	unsigned long nr_allocated;
	unsigned long nr_tallocated;
	int lock;
};

static void lock(struct kmem_cache *c)
{
	while (__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&c->lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

static void unlock(struct kmem_cache *c)
{
	__atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE);
}

/* Refills the free list with a fresh chunk; false if memory ran out. */
static bool grow(struct kmem_cache *c)
{
	size_t align = c->align ? c->align : sizeof(void *);
	size_t size = (c->size + align - 1) / align * align;
	char *chunk = aligned_alloc(align, size * CHUNK_OBJS);
	int i;

	if (!chunk)
		return false;
	for (i = 0; i < CHUNK_OBJS; i++) {
		*(void **)(chunk + i * size) = c->free;
		c->free = chunk + i * size;
	}
	return true;
}

/* One object, the lock held. */
static void *take(struct kmem_cache *c, gfp_t gfp)
{
	void *p;

	if (!c->free && !grow(c))
		return NULL;
	p = c->free;
	c->free = *(void **)p;
	c->nr_allocated++;
	c->nr_tallocated++;
	return p;
}

static void prepare(struct kmem_cache *c, void *p, gfp_t gfp)
{
	if (c->ctor)
		c->ctor(p);
	else if (gfp & __GFP_ZERO)
		memset(p, 0, c->size);
}

static void give(struct kmem_cache *c, void *p)
{
	*(void **)p = c->free;
	c->free = p;
	c->nr_allocated--;
}

void *kmem_cache_alloc_lru(struct kmem_cache *c, struct list_lru *lru, int gfp)
{
	void *p;

	lock(c);
	p = take(c, gfp);
	unlock(c);
	if (p)
		prepare(c, p, gfp);
	return p;
}

void kmem_cache_free(struct kmem_cache *c, void *p)
{
	lock(c);
	give(c, p);
	unlock(c);
}

int kmem_cache_alloc_bulk(struct kmem_cache *c, gfp_t gfp, size_t size, void **list)
{
	size_t i;

	lock(c);
	for (i = 0; i < size; i++) {
		list[i] = take(c, gfp);
		if (!list[i]) {
			while (i--)
				give(c, list[i]);
			unlock(c);
			return 0;
		}
	}
	unlock(c);
	for (i = 0; i < size; i++)
		prepare(c, list[i], gfp);
	return size;
}

void kmem_cache_free_bulk(struct kmem_cache *c, size_t size, void **list)
{
	size_t i;

	lock(c);
	for (i = 0; i < size; i++)
		give(c, list[i]);
	unlock(c);
}

struct kmem_cache *kmem_cache_create(const char *name, unsigned int size, unsigned int align,
				     unsigned int flags, void (*ctor)(void *))
{
	struct kmem_cache *c = calloc(1, sizeof(*c));

	if (c) {
		c->size = size;
		c->align = align;
		c->ctor = ctor;
	}
	return c;
}

void kmem_cache_shrink(struct kmem_cache *c)
{
}

/* The test hooks maple_tree.c refers to (its own tests use them). */
unsigned long kmem_cache_get_alloc(struct kmem_cache *c)
{
	return c->size * c->nr_allocated;
}

unsigned long kmem_cache_nr_allocated(struct kmem_cache *c)
{
	return c->nr_allocated;
}

unsigned long kmem_cache_nr_tallocated(struct kmem_cache *c)
{
	return c->nr_tallocated;
}

void kmem_cache_zero_nr_tallocated(struct kmem_cache *c)
{
	c->nr_tallocated = 0;
}

void kmem_cache_set_callback(struct kmem_cache *c, void (*callback)(void *))
{
}

void kmem_cache_set_private(struct kmem_cache *c, void *private)
{
}

void kmem_cache_set_non_kernel(struct kmem_cache *c, unsigned int val)
{
}
