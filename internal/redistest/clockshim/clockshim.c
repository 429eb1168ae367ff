/*
 * clockshim: an LD_PRELOAD library that adds an offset to the wall clock
 * (CLOCK_REALTIME and its variants, gettimeofday, time) of the one process it
 * is loaded into, leaving the monotonic clocks alone. The offset, in
 * nanoseconds, is a little-endian int64 at the start of the file named by
 * $REDISTEST_CLOCK_FILE; the file is mapped once at load, so a test steps the
 * clock at run time by rewriting those 8 bytes in place.
 *
 * It calls no allocator and no dlsym (the real clocks are read by raw system
 * calls): an interposer that allocates deadlocks inside jemalloc.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ns;

__attribute__((constructor)) static void clockshim_init(void) {
	const char *path = getenv("REDISTEST_CLOCK_FILE");
	if (!path) return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return;
	void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED) offset_ns = (volatile int64_t *)p;
}

static int64_t offset(void) {
	if (!offset_ns) return 0;
	int64_t a, b;
	do { /* a read torn by a concurrent write differs from the next */
		a = *offset_ns;
		b = *offset_ns;
	} while (a != b);
	return a;
}

static int is_wall(clockid_t clk) {
	return clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE || clk == CLOCK_TAI;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
	int r = (int)syscall(SYS_clock_gettime, clk, ts);
	if (r != 0 || !is_wall(clk)) return r;
	int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset();
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
	return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r != 0) return r;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *out) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (out) *out = ts.tv_sec;
	return ts.tv_sec;
}
