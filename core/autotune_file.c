/* The autotune cache file: parse, lock, write-then-rename (format in autotune_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "autotune_file.h"
#include "internal.h"

#define FNV_PRIME 0x100000001b3ull

uint64_t at_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* ---- times as text: "<ms>.<6 digits>", integers only, so no locale can change it ---- */

static void format_ms(char *out, size_t cap, double ms)
{
    uint64_t ns = (uint64_t)llround(ms * 1e6);
    snprintf(out, cap, "%" PRIu64 ".%06" PRIu64, ns / 1000000u, ns % 1000000u);
}

/* Parses s[0..n) as format_ms writes it; 0 or -1. */
static int parse_ms(const char *s, size_t n, double *ms)
{
    size_t i = 0;
    uint64_t whole = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && i < 10)
        whole = whole * 10 + (uint64_t)(s[i++] - '0');
    if (i == 0 || i + 7 != n || s[i] != '.')
        return -1;
    uint64_t frac = 0;
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        frac = frac * 10 + (uint64_t)(s[k] - '0');
    }
    *ms = (double)whole + (double)frac / 1e6;
    return at_valid_ms(*ms) ? 0 : -1;
}

/* ---- reading ---- */

/* Parses one entry line (no '\n'); 0 or -1. */
static int parse_entry(const char *line, size_t n, at_table_t *out)
{
    const char *tab1 = memchr(line, '\t', n);
    if (!tab1)
        return -1;
    const char *rest = tab1 + 1;
    const char *tab2 = memchr(rest, '\t', n - (size_t)(rest - line));
    if (!tab2)
        return -1;
    size_t key_n = (size_t)(tab1 - line), win_n = (size_t)(tab2 - rest);
    if (key_n >= RUDNN_AUTOTUNE_KEY_MAX || win_n >= RUDNN_AUTOTUNE_NAME_MAX)
        return -1;
    char key[RUDNN_AUTOTUNE_KEY_MAX], winner[RUDNN_AUTOTUNE_NAME_MAX];
    memcpy(key, line, key_n);
    key[key_n] = '\0';
    memcpy(winner, rest, win_n);
    winner[win_n] = '\0';
    double ms;
    const char *t = tab2 + 1;
    if (!at_valid_text(key, sizeof key) || !at_valid_text(winner, sizeof winner) ||
        strlen(key) != key_n || strlen(winner) != win_n ||
        parse_ms(t, n - (size_t)(t - line), &ms) != 0)
        return -1;
    if (at_table_find(out, key)) /* writers never repeat a key */
        return -1;
    return at_table_put(out, key, winner, ms, 0) == 0 ? 0 : -2;
}

/* Parses the trailer "end <count> <16 hex>" (no '\n'); 0 or -1. */
static int parse_trailer(const char *line, size_t n, unsigned long long *count, uint64_t *sum)
{
    char buf[64];
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    char hex[17];
    int used = 0;
    if (sscanf(buf, "end %llu %16[0-9a-f]%n", count, hex, &used) != 2 || (size_t)used != n ||
        strlen(hex) != 16)
        return -1;
    *sum = (uint64_t)strtoull(hex, NULL, 16);
    return 0;
}

/* Checks and parses a whole file image. 0, or -1 with why. */
static int parse_file(const char *data, size_t size, at_table_t *out, char *why, size_t cap)
{
    if (size == 0) {
        snprintf(why, cap, "empty file");
        return -1;
    }
    const char *nl = memchr(data, '\n', size < 64 ? size : 64);
    size_t name_n = strlen(AT_FORMAT_NAME);
    if (!nl || (size_t)(nl - data) <= name_n || memcmp(data, AT_FORMAT_NAME " ", name_n + 1) != 0) {
        snprintf(why, cap, "not a %s file", AT_FORMAT_NAME);
        return -1;
    }
    char version[32];
    size_t vn = (size_t)(nl - data) - name_n - 1;
    if (vn >= sizeof version)
        vn = sizeof version - 1;
    memcpy(version, data + name_n + 1, vn);
    version[vn] = '\0';
    char expected[16];
    snprintf(expected, sizeof expected, "%d", AT_FORMAT_VERSION);
    if (strcmp(version, expected) != 0) {
        for (char *p = version; *p; p++) /* the text goes into a warning */
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                *p = '?';
        snprintf(why, cap, "format version '%s', this library reads %d", version, AT_FORMAT_VERSION);
        return -1;
    }
    size_t pos = (size_t)(nl - data) + 1;
    unsigned long long entries = 0;
    for (unsigned long long line_no = 2;; line_no++) {
        if (pos == size) {
            snprintf(why, cap, "truncated (no trailer line)");
            return -1;
        }
        const char *line = data + pos;
        size_t left = size - pos;
        const char *end = memchr(line, '\n', left < AT_LINE_MAX + 1 ? left : AT_LINE_MAX + 1);
        if (!end) {
            if (left > AT_LINE_MAX)
                snprintf(why, cap, "line %llu longer than %d bytes", line_no, AT_LINE_MAX);
            else
                snprintf(why, cap, "truncated (no trailer line)");
            return -1;
        }
        size_t n = (size_t)(end - line);
        if (n >= 4 && memcmp(line, "end ", 4) == 0) {
            unsigned long long count;
            uint64_t sum;
            if (parse_trailer(line, n, &count, &sum) != 0) {
                snprintf(why, cap, "line %llu: malformed trailer", line_no);
                return -1;
            }
            if (pos + n + 1 != size) {
                snprintf(why, cap, "data after the trailer line");
                return -1;
            }
            if (at_fnv1a(AT_FNV_OFFSET, data, pos) != sum) {
                snprintf(why, cap, "checksum mismatch");
                return -1;
            }
            if (count != entries) {
                snprintf(why, cap, "trailer counts %llu entries, the file holds %llu", count, entries);
                return -1;
            }
            return 0;
        }
        int rc = parse_entry(line, n, out);
        if (rc == -2) {
            snprintf(why, cap, "out of memory reading it");
            return -2;
        }
        if (rc != 0) {
            snprintf(why, cap, "line %llu malformed", line_no);
            return -1;
        }
        entries++;
        pos += n + 1;
    }
}

int at_file_read(const char *path, at_table_t *out, char *why, size_t cap)
{
    at_table_free(out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 1;
        snprintf(why, cap, "cannot open it: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    char *data = NULL;
    int rc = -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, cap, "not a regular file");
        goto done;
    }
    if ((uint64_t)st.st_size > AT_FILE_MAX) {
        snprintf(why, cap, "larger than %zu bytes", AT_FILE_MAX);
        goto done;
    }
    size_t size = (size_t)st.st_size;
    data = malloc(size + 1);
    if (!data) {
        snprintf(why, cap, "out of memory reading it");
        rc = -2;
        goto done;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, data + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, cap, "cannot read it: %s", strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    rc = parse_file(data, got, out, why, cap);
done:
    if (rc != 0)
        at_table_free(out);
    free(data);
    close(fd);
    return rc;
}

/* ---- locking and writing ---- */

/* mkdir -p of path's folder, mode 0755; 0 when it exists afterwards. */
static int make_parent_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0; /* the current folder, or "/" */
    *slash = '\0';
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int at_file_lock(const char *path, int *lock_fd, char *why, size_t cap)
{
    char lock_path[4200];
    if (snprintf(lock_path, sizeof lock_path, "%s.lock", path) >= (int)sizeof lock_path) {
        snprintf(why, cap, "path too long");
        return -1;
    }
    if (make_parent_dirs(path) != 0) {
        snprintf(why, cap, "cannot create its folder: %s", strerror(errno));
        return -1;
    }
    /* the lock file stays: removing it would let two writers lock different files */
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, cap, "cannot open %s: %s", lock_path, strerror(errno));
        return -1;
    }
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
        snprintf(why, cap, "cannot lock %s: %s", lock_path, strerror(errno));
        close(fd);
        return -1;
    }
    *lock_fd = fd;
    return 0;
}

void at_file_unlock(int lock_fd)
{
    flock(lock_fd, LOCK_UN);
    close(lock_fd);
}

/* The file image of t, malloc'd; NULL when out of memory. */
static char *format_file(const at_table_t *t, size_t *size)
{
    size_t cap = 64 + t->n * (AT_LINE_MAX + 1);
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    size_t n = (size_t)snprintf(buf, cap, "%s %d\n", AT_FORMAT_NAME, AT_FORMAT_VERSION);
    for (size_t i = 0; i < t->n; i++) {
        char ms[40];
        format_ms(ms, sizeof ms, t->v[i].ms);
        n += (size_t)snprintf(buf + n, cap - n, "%s\t%s\t%s\n", t->v[i].key, t->v[i].winner, ms);
    }
    uint64_t sum = at_fnv1a(AT_FNV_OFFSET, buf, n);
    n += (size_t)snprintf(buf + n, cap - n, "end %zu %016" PRIx64 "\n", t->n, sum);
    *size = n;
    return buf;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int at_file_write(const char *path, const at_table_t *t, char *why, size_t cap)
{
    static atomic_uint counter;
    char tmp[4300];
    unsigned c = atomic_fetch_add(&counter, 1u);
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), c) >= (int)sizeof tmp) {
        snprintf(why, cap, "path too long");
        return -1;
    }
    size_t size;
    char *image = format_file(t, &size);
    if (!image) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, cap, "cannot create %s: %s", tmp, strerror(errno));
        free(image);
        return -1;
    }
    int ok = write_all(fd, image, size) == 0 && fsync(fd) == 0;
    int err = errno;
    free(image);
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        snprintf(why, cap, "cannot write %s: %s", tmp, strerror(err));
        unlink(tmp);
        return -1;
    }
    /* make the rename itself durable; a failure here loses nothing already written */
    char dir[4096];
    rudnn_copy_str(dir, sizeof dir, path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *(slash == dir ? slash + 1 : slash) = '\0';
        int dfd = open(dir, O_RDONLY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}
