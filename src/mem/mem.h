/*
 * mem: the one way the cpython layer reads the target. A struct mem reads
 * through a memory source (struct mem_source: a live process, an image made
 * of memory regions, or a source wrapping another, such as the recorder's),
 * and adds what no source knows of: the batched prefetch of what the last
 * snapshot read, second copies, coalescing, counters. Nothing above the
 * source tells one kind of memory from another. Every read is counted; the
 * counters cost an add per read.
 */
#ifndef PYSTROBE_MEM_H
#define PYSTROBE_MEM_H

#include <stddef.h>
#include <stdint.h>

/* The target's page size (x86-64 Linux): a page is mapped or not as a whole. */
#define MEM_PAGE_SIZE 4096

/* Spans a snapshot can have read twice (mem_recheck_hint), and the most
 * bytes of each. */
#define MEM_RECHECK_MAX 256
#define MEM_RECHECK_SPAN (16u << 10)

/* Addresses a snapshot can have the next batch read innermost
 * (mem_inner_hint). */
#define MEM_INNER_MAX 256

/* One piece of a batched read. */
struct mem_seg {
    uint64_t addr;
    void *buf;
    size_t len;
};

/*
 * Where memory comes from. Every function returns as the platform layer's
 * (platform.h) do, whatever the memory is:
 *  read: copy len bytes at addr; 0, or PYS_E_BADADDR (unmapped, or only
 *    partly mapped), PYS_E_EXITED (the process is gone), PYS_E_PERM.
 *  readv: read segments in order, in one go (one process_vm_readv): the
 *    number read whole (a segment after one that failed is not read, and a
 *    segment's buffer may be partly written), or a negative code when not
 *    even the first was (PYS_E_BADADDR when it is unmapped). Zero-length
 *    segments count as read when every one before them was. At most
 *    MEM_BATCH_MAX + 1 + 2 * MEM_RECHECK_MAX segments per call.
 *  write: write len bytes at addr; errors as read (PYS_E_PERM where the
 *    memory may not be written).
 *  clock_ns: a monotonic clock in nanoseconds, for telling how long a batch
 *    took (a live process: the system's; an image: its own, so that tests
 *    on images are deterministic).
 * A source is not owned by the struct mem reading it: it must outlive it.
 */
struct mem_source;
struct mem_source_ops {
    int (*read)(struct mem_source *src, uint64_t addr, void *buf, size_t len);
    int (*readv)(struct mem_source *src, const struct mem_seg *segs, size_t n);
    int (*write)(struct mem_source *src, uint64_t addr, const void *buf, size_t len);
    uint64_t (*clock_ns)(struct mem_source *src);
};
struct mem_source {
    const struct mem_source_ops *ops;
};

/* process_vm_readv takes at most IOV_MAX (1024) iovecs per call. */
#define MEM_BATCH_MAX 1024
/* How many recent batches of a kind a batch's time is judged against
 * (struct mem's recent_ns): enough that one fast batch among them is
 * likely, few enough that a plan grown for good is the usual again soon. */
#define MEM_BATCH_RECENT 16

/* A live process (source_proc.c): process_vm_readv and process_vm_writev. */
struct mem_proc {
    struct mem_source base;
    int pid;
};
void mem_proc_init(struct mem_proc *p, int pid);

struct mem_region {
    uint64_t addr;
    const uint8_t *data;
    size_t len;
    uint8_t *writable; /* the same bytes, if writes may change them; else NULL */
};

/* An image (source_image.c): memory made of regions, which must not
 * overlap. A read may span regions that meet end to start; anything outside
 * them reads as unmapped memory does. Writes go into a region's `writable`
 * bytes (PYS_E_PERM where it has none). Its clock stands still: a batch on
 * an image is never taken as paused, but for the first of its kind (no
 * batch before it to judge it by). */
struct mem_image {
    struct mem_source base;
    const struct mem_region *regions;
    size_t nregions;
};
void mem_image_init(struct mem_image *im, const struct mem_region *regions, size_t n);
/* Append region r to the n regions at *v (room for *cap, grown as needed),
 * joined to the last one where r continues it, in the target's addresses
 * and in the bytes that hold them (and writable bytes, if any); an empty r
 * adds nothing. 0, or PYS_E_NOMEM with *v, *n and *cap unchanged. */
int mem_regions_append(struct mem_region **v, size_t *n, size_t *cap, struct mem_region r);
/* The image's regions holding [addr, addr + len), copied into buf: 0, or
 * PYS_E_BADADDR. For sources built on images. */
int mem_image_copy(const struct mem_region *regions, size_t n, uint64_t addr, void *buf,
                   size_t len);

/* A recorder (source_record.c): reads through `inner` and notes the page
 * of every byte read (successfully); refuses every write (PYS_E_PERM). */
struct mem_record {
    struct mem_source base;
    struct mem_source *inner;
    uint64_t *pages; /* page addresses, in the order met, repeated */
    size_t npages, cap;
    int failed; /* out of memory: pages is incomplete */
};
void mem_record_init(struct mem_record *r, struct mem_source *inner);
/* Sort and deduplicate r->pages; how many distinct pages were read. */
size_t mem_record_pages(struct mem_record *r);
void mem_record_release(struct mem_record *r);

struct mem_stats {
    uint64_t reads;      /* calls that reached the target (a batch is one) */
    uint64_t pieces;     /* the pieces (iovecs) of those calls */
    uint64_t prefetched; /* reads served from the snapshot's prefetch */
    uint64_t bytes;      /* bytes asked for */
    uint64_t failures;   /* reads that failed */
    uint64_t writes;     /* writes into the target */
    uint64_t batches;    /* batched prefetches read (a snapshot's or a retry's) */
    uint64_t paused;     /* of those, judged paused midway (mem_batch_paused) */
};

/* One span read (or to read) from the target. */
struct mem_span {
    uint64_t addr;
    size_t len;
    size_t off; /* in the prefetch buffer */
};

/* A point in a struct mem's reads (mem_mark, below). */
struct mem_mark {
    uint64_t epoch, outside;
};

struct mem {
    struct mem_source *src; /* NULL: nothing to read (every read fails) */
    /* The source mem_init_process and mem_init_image make. */
    union {
        struct mem_proc proc;
        struct mem_image image;
    } own;
    struct mem_stats stats;
    /* Prefetch (mem_prefetch_begin): what the previous snapshot read, read
     * again in one batch; `log` records this snapshot's reads for the next. */
    struct mem_span *log;
    size_t nlog, caplog;
    struct mem_span *pf; /* sorted by addr */
    size_t npf, cappf;
    struct mem_span *plan; /* the merged spans last prefetched, and the log they came from */
    size_t nplan, capplan;
    struct mem_span *planlog;
    size_t nplanlog, capplanlog;
    struct mem_span *rplan; /* a retry's plan (retry_plan) */
    size_t caprplan;
    size_t log_mark;               /* mem_log_mark: the log's length then */
    struct mem_span *keep, *keep2; /* spans of recent plans (keep2: scratch) */
    size_t nkeep, capkeep, capkeep2;
    uint64_t snapshots;   /* mem_prefetch_begin calls */
    uint64_t keep_expiry; /* the snapshot at which a span of `keep` not in the log leaves it */
    uint64_t plan_snap, planlog_last; /* the plan made at, its log last read at (snapshots) */
    uint64_t keep_snapshots; /* how many snapshots a span stays in `keep` (mem_init_process: 16) */
    uint8_t *pfbuf;
    size_t pfcap;
    int logging;
    /* mem_prefetch_late: one more word the prefetch reads after all else. */
    uint64_t late_addr, late_val;
    int late_ok; /* late_val was read by the last prefetch */
    /* Provenance (mem_mark): system calls made, and reads the prefetch did
     * not serve (plus mem_force_recheck's). Logic, unlike `stats`. */
    uint64_t epoch, outside;
    /* mem_recheck_hint: spans the next batch reads a second time, after
     * the others (rc_cur: hinted in this snapshot, rc_prev: in the last one);
     * rc: those the last batch read again (off into rcbuf). */
    struct mem_span rc_prev[MEM_RECHECK_MAX], rc_cur[MEM_RECHECK_MAX], rc[2 * MEM_RECHECK_MAX];
    size_t nrc_prev, nrc_cur, nrc, rc_last;
    uint8_t rc_last_kind[2 * MEM_RECHECK_MAX]; /* rc[i] is read after the others */
    /* How long the last MEM_BATCH_RECENT batches of each kind took for
     * each unit of what they read (mem.c: batch_cost; in 1/16 ns;
     * [0]: a snapshot's batch, [1]: a retry's, which reads less), the
     * newest at recent_at[k] - 1, recent_n[k] of them known: one that took
     * far longer than the fastest of them for its own was paused (mem.c:
     * judge_batch). */
    uint64_t recent_ns[2][MEM_BATCH_RECENT];
    size_t recent_at[2], recent_n[2];
    /* The last batch was paused midway (mem_batch_paused). */
    int paused;
    uint8_t *rcbuf;
    size_t rccap;
    /* mem_inner_hint: addresses whose spans the next batch reads innermost
     * (inner_cur: hinted in this snapshot, inner_prev: in the last one;
     * inner: those a batch goes by, sorted), and read_plan's order. */
    uint64_t inner_prev[MEM_INNER_MAX], inner_cur[MEM_INNER_MAX], inner[2 * MEM_INNER_MAX];
    uint64_t inner_seq[2 * MEM_INNER_MAX]; /* inner, in the order hinted */
    size_t ninner_prev, ninner_cur, ninner;
    size_t *ord;
    size_t capord;
    /* mem_readv_fresh's scratch: the spans it reads and their bytes. */
    struct mem_seg *hull;
    size_t caphull;
    uint8_t *hullbuf;
    size_t caphullbuf;
    /* mem_readv_fresh_twice's: which segments' two reads differed. */
    uint8_t *moved;
    size_t capmoved;
};

/*
 * Provenance: where what was read came from. A mark names a point in m's
 * reads; core compares marks through these functions, never m's fields.
 *  mem_read_since: did a system call reach the target after mk? 0: all
 *    read since came from copies already made (the batch, second copies).
 *  mem_past_batch_since: did a read after mk go past the snapshot's batch
 *    (one the prefetch did not serve), or did mem_force_recheck say so?
 *  mem_force_recheck: take this snapshot as having read past its batch
 *    (something it goes by was not in the batch): checks that trust the
 *    batch alone are made again by reading.
 *  mem_batch_paused: the last batch took longer than the fastest recent
 *    batch of its kind by more than noise (its copy was paused midway), or
 *    there is no such batch yet to tell: what it copied may span a long
 *    stretch of the target's time, and no two of its copies are taken as
 *    one moment.
 */

/* Add m's counters to *sum. */
void mem_stats_add(const struct mem *m, struct mem_stats *sum);
/* How many snapshots a span stays in the batched read after it was last
 * read (KEEP_SNAPSHOTS unless set; 0: only what the last one read). */
void mem_set_keep(struct mem *m, uint64_t snapshots);
/* Read through src from now on (not owned), between snapshots. */
void mem_set_source(struct mem *m, struct mem_source *src);
/* The source m reads through (NULL: none). */
static inline struct mem_source *mem_source_of(const struct mem *m)
{
    return m->src;
}

/* (Inline: they are asked on every walk, from core's files.) */
static inline struct mem_mark mem_mark(const struct mem *m)
{
    return (struct mem_mark){m->epoch, m->outside};
}
static inline int mem_read_since(const struct mem *m, struct mem_mark mk)
{
    return m->epoch != mk.epoch;
}
static inline int mem_past_batch_since(const struct mem *m, struct mem_mark mk)
{
    return m->outside != mk.outside;
}
static inline void mem_force_recheck(struct mem *m)
{
    m->outside++;
}
static inline int mem_batch_paused(const struct mem *m)
{
    return m->paused;
}

/* The clock of m's source (mem_source_ops.clock_ns). */
uint64_t mem_clock_ns(struct mem *m);

/* Read through src (not owned). mem_init_process and mem_init_image make
 * their source themselves, inside the struct mem, which must then not be
 * copied (a session, whose two struct mems swap, uses mem_init). */
void mem_init(struct mem *m, struct mem_source *src);
void mem_init_process(struct mem *m, int pid);
void mem_init_image(struct mem *m, const struct mem_region *regions, size_t n);
void mem_release(struct mem *m);

/*
 * Start a snapshot: read everything the previous snapshot read (its spans,
 * merged) in as few system calls as possible, and serve this snapshot's
 * reads from that copy where they fall inside it; reads that do not are made
 * as usual. Every read is also recorded for the next snapshot. Spans that
 * can no longer be read are dropped. mem_prefetch_end forgets the copy (and
 * must be called before any read whose point is to see the target again).
 */
void mem_prefetch_begin(struct mem *m);
void mem_prefetch_end(struct mem *m);
/* Within a snapshot: read again, in one batch, what the snapshot has read
 * since mem_log_mark and the spans kept (a thread that moved on while it was
 * read is read again from it), but not what only reads made before the mark
 * took (the runtime, the interpreter, the threads done before), the late
 * word last; the log goes on, so the next snapshot still reads all. */
void mem_prefetch_retry(struct mem *m);
/* Mark the start of a unit of reads (one thread's) that a retry may have
 * to make again; mem_prefetch_begin clears it. */
void mem_log_mark(struct mem *m);
/* Where the mark stands, and set it back there (within the same snapshot):
 * a retry of a unit read before others then reads that unit's spans
 * (and the later ones'), not only the last unit's. */
size_t mem_log_marked(const struct mem *m);
void mem_log_mark_at(struct mem *m, size_t at);

/* Have the next mem_prefetch_begin read [addr, addr + len) too, as if the
 * last snapshot had read it. */
void mem_prefetch_hint(struct mem *m, uint64_t addr, size_t len);
/* Whether the snapshot's batch (not mem_prefetch_end'ed yet) holds a copy
 * of [addr, addr + len): it was readable as the batch was read. */
int mem_in_batch(const struct mem *m, uint64_t addr, size_t len);
/* Whether the snapshot's batch holds copies of [a, a + alen) and of
 * [b, b + blen), the first made after the whole of the second: the batch
 * copies its pieces one after the other, each from its lowest address up. */
int mem_batch_copied_after(const struct mem *m, uint64_t a, size_t alen, uint64_t b, size_t blen);

/* Have each prefetch also read the 8 bytes at addr (0: none) as its very last
 * piece, after every other span (the span that holds them, if any, is the
 * one read last): mem_prefetch_late_value then gives them (1), or 0 if the
 * last prefetch did not read them. For a counter that must be read after
 * what it guards. */
void mem_prefetch_late(struct mem *m, uint64_t addr);
int mem_prefetch_late_value(const struct mem *m, uint64_t *out);

/*
 * One process_vm_readv is not one moment: the target runs on while the
 * kernel copies, and a copy can be interrupted. Have the next prefetch (and
 * its retries, with the spans hinted since) read [addr, addr + len) a second
 * time, after every span it reads (the late word aside, which stays last):
 * the second copies in the reverse order of their addresses, so that the
 * spans read last are copied again soonest. mem_recheck_view then
 * gives that second copy of [addr, addr + len) (NULL if the last prefetch
 * did not read one covering it): bytes of the first copy that differ from
 * it were changing while the batch was read.
 */
void mem_recheck_hint(struct mem *m, uint64_t addr, size_t len);
/* The same for a second copy that only has to come after the first copies
 * of what it vouches for (a cached code object a frame names), not close
 * to them: read after every other second copy, it leaves the stretch
 * between the frames' two copies as short as they can make it. */
void mem_recheck_hint_last(struct mem *m, uint64_t addr, size_t len);
const uint8_t *mem_recheck_view(struct mem *m, uint64_t addr, size_t len);

/*
 * Have the next prefetch (and its retries) read the span holding addr
 * after its other spans (the late word aside), and its second copy, if one
 * is hinted, before the other second copies: what is hinted so is copied
 * twice within the shortest stretch of the target's time, the rest of the
 * batch around it. For what must make one moment with the other spans
 * hinted so (a thread's current frame and its frames when they are objects
 * anywhere in the heap), not for what is only checked later (code
 * objects). The others are read by address, these in the order hinted,
 * their second copies in the reverse order (a caller hinted before its
 * callee: its two copies bracket the callee's, and the callee is copied
 * after it, torn.c's top_settled).
 */
void mem_inner_hint(struct mem *m, uint64_t addr);

/*
 * Grow *buf (capacity *cap) to hold need bytes, doubling; 0 or -1 (out of
 * memory, *buf unchanged). For buffers the kernel copies the target into:
 * their new pages are touched at once, since one the copy meets untouched
 * faults midway, a pause in which the target runs on (a torn copy).
 */
int mem_grow_buffer(uint8_t **buf, size_t *cap, size_t need);

/* Read from the target itself, never from the prefetch (and not recorded).
 * mem_readv_fresh reads segments that lie close together, in the order
 * given, as one span. */
int mem_read_fresh(struct mem *m, uint64_t addr, void *buf, size_t len);
int mem_readv_fresh(struct mem *m, const struct mem_seg *segs, size_t n);
/* The same twice over in one system call, the first time in the reverse
 * order (the last segment's span first), the second in the given order:
 * segs' bufs get the second read, and (*moved)[i] (m's, until its next
 * read) says whether segs[i]'s two reads differed. A moment between the
 * two reads saw every segment as both did, unless one left and came back
 * between its two copies; those of segs[i] lie around those of every
 * segment after it, segs[0]'s are adjacent pieces: put first what moves
 * most (a chain's top). 0, or an error (PYS_E_NOMEM: more than one read
 * coalesced can take). */
int mem_readv_fresh_twice(struct mem *m, const struct mem_seg *segs, size_t n,
                          const uint8_t **moved);
/* Read segments from the target in one system call (at most 1024 of them),
 * as they are (not coalesced), for reads that may run into memory no longer
 * mapped: the number of leading segments read whole (0 if not even the
 * first), or PYS_E_EXITED / PYS_E_PERM. */
int mem_readv_some(struct mem *m, const struct mem_seg *segs, size_t n);

/* Copy len bytes at addr. 0, or PYS_E_BADADDR (unmapped, short),
 * PYS_E_EXITED (process gone), PYS_E_PERM. Address 0 is always bad. */
int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len);
/* mem_read, but have the next snapshot's prefetch take [note_addr,
 * note_addr + note_len) (which holds the read; all of it readable): for
 * reads whose extent varies from one snapshot to the next, so that the
 * prefetch still covers them. */
int mem_read_noting(struct mem *m, uint64_t addr, void *buf, size_t len, uint64_t note_addr,
                    size_t note_len);
int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *out);

/*
 * mem_read_noting for a read whose bytes must be checked against a copy
 * made later (they may be changing as they are read). Unless the prefetch
 * holds [addr, addr + len), one system call reads it into buf, then again
 * into `second`, then the `after` segments (at most MEM_TWICE_AFTER_MAX),
 * in that order: every byte of the second copy is copied after every byte
 * of the first, and the after segments after both. Returns 1 when all of
 * that was read, 0 when only buf was (from the prefetch, or the rest
 * failed), or mem_read's errors.
 */
#define MEM_TWICE_AFTER_MAX 4
int mem_read_twice(struct mem *m, uint64_t addr, void *buf, void *second, size_t len,
                   const struct mem_seg *after, size_t nafter, uint64_t note_addr, size_t note_len);

/*
 * mem_read, and unless the prefetch holds [addr, addr + len), the same
 * system call goes on to read the `more` segments (at most MEM_THEN_MAX), as
 * far as they are mapped (mem_readv_some), for neither the prefetch nor its
 * log: the number of `more` segments read whole (0 too when the read came
 * from the prefetch), or mem_read's errors.
 */
#define MEM_THEN_MAX 16
int mem_read_then(struct mem *m, uint64_t addr, void *buf, size_t len, const struct mem_seg *more,
                  size_t nmore);

/* Write len bytes at addr (an image only where its region is writable). */
int mem_write(struct mem *m, uint64_t addr, const void *buf, size_t len);
int mem_write_u64(struct mem *m, uint64_t addr, uint64_t v);

/* Read all segments, in as few system calls and pieces as possible (those
 * the prefetch does not hold are read as mem_readv_fresh reads them). 0 when
 * all were read, else the first failure's code. */
int mem_readv(struct mem *m, const struct mem_seg *segs, size_t n);

#endif
