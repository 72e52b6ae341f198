/*
 * pace_floor: what pacing alone costs, for bench/run.py.
 *
 *   pace_floor RATE_HZ SECONDS
 *
 * Sleeps to each deadline of RATE_HZ with clock_nanosleep (absolute
 * deadlines, as `pystrobe record` paces itself below 20 kHz) for SECONDS,
 * doing nothing else. The CPU it uses is the least any sampler that sleeps
 * between samples can use at that rate on this machine: on a virtual
 * machine each wake-up can cost tens of microseconds of the sleeper's CPU.
 * Prints one line of key=value pairs on stdout:
 *
 *   wakes seconds cpu_s cpu_per_s cpu_us_per_wake late_us_median
 *
 * (cpu_s from /proc/self/schedstat, as bench/run.py measures the
 * profilers; getrusage where that file is missing). Exits 0, or 2 on usage
 * errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_LATE 200000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double cpu_seconds(void)
{
    unsigned long long ns;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (f) {
        int n = fscanf(f, "%llu", &ns);
        fclose(f);
        if (n == 1)
            return (double)ns / 1e9;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    double rate = argc == 3 ? atof(argv[1]) : 0, secs = argc == 3 ? atof(argv[2]) : 0;
    if (rate <= 0 || rate > 1e6 || secs <= 0 || secs > 3600) {
        fprintf(stderr, "usage: pace_floor RATE_HZ SECONDS\n");
        return 2;
    }
    static uint32_t late[MAX_LATE];
    uint64_t interval = (uint64_t)(1e9 / rate), start = now_ns(), next = start;
    uint64_t end = start + (uint64_t)(secs * 1e9);
    size_t wakes = 0;
    double cpu0 = cpu_seconds();
    while (next + interval < end) {
        next += interval;
        struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
            ;
        uint64_t t = now_ns();
        if (wakes < MAX_LATE)
            late[wakes] = (uint32_t)(t - next > UINT32_MAX ? UINT32_MAX : t - next);
        wakes++;
        /* Late by more than one interval: the next deadlines are already
         * past; skip them, as the sampler does. */
        if (t > next + interval)
            next += (t - next) / interval * interval;
    }
    double cpu = cpu_seconds() - cpu0, took = (double)(now_ns() - start) / 1e9;
    size_t n = wakes < MAX_LATE ? wakes : MAX_LATE;
    qsort(late, n, sizeof *late, cmp_u32);
    printf("wakes=%zu seconds=%.3f cpu_s=%.4f cpu_per_s=%.4f cpu_us_per_wake=%.2f "
           "late_us_median=%.1f\n",
           wakes, took, cpu, cpu / took, wakes ? cpu / (double)wakes * 1e6 : 0.0,
           n ? (double)late[n / 2] / 1e3 : 0.0);
    return 0;
}
