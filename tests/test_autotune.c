/* The autotune cache (core/autotune.h), through the static core library.
 *
 *   test_autotune file   the table and the cache file: no backend needed
 *   test_autotune time   the key and rudnn_autotune_time on the default backend (exits 77 without)
 *
 * Each test uses a file of its own in a fresh mkdtemp folder through
 * rudnn_autotune_set_path_for_tests. What is read once per process (the environment) is checked
 * in child processes: this binary run again with a "child-*" argument, which exits 0 when its
 * checks hold. The file checks here parse the format themselves (autotune_file.h), with their
 * own FNV-1a, so that a writer and a reader sharing a bug cannot agree on a wrong file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autotune.h"
#include "common.h"

static const char *self_path; /* argv[0], for the child processes */

/* ---- temporary folders ---- */

static char tmp_dir[512];
static char tmp_file[600];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    chmod(path, 0700);
    return remove(path);
}

/* A fresh folder; the cache file in a subfolder that does not exist yet (mkdir -p). */
static void fresh_dir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/rudnn-autotune-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(tmp_dir));
    snprintf(tmp_file, sizeof tmp_file, "%s/sub/dir/autotune.txt", tmp_dir);
    rudnn_autotune_set_path_for_tests(tmp_file);
}

static int teardown_dir(void **state)
{
    (void)state;
    rudnn_autotune_set_path_for_tests(NULL);
    if (tmp_dir[0])
        nftw(tmp_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    tmp_dir[0] = '\0';
    return 0;
}

static void write_text(const char *path, const char *data, size_t n)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    char sub_dir[600];
    snprintf(sub_dir, sizeof sub_dir, "%s/sub", tmp_dir);
    mkdir(sub_dir, 0755); /* fresh_dir's file lies two folders down */
    mkdir(dir, 0755);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = rt_xmalloc(1 << 20);
    *n = fread(buf, 1, (1 << 20) - 1, f);
    buf[*n] = '\0';
    fclose(f);
    return buf;
}

/* ---- an independent check of the file format ---- */

static uint64_t fnv(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The trailer line for body (header + entries): "end <count> <fnv>\n". */
static void trailer_for(char *out, size_t cap, const char *body, size_t count)
{
    snprintf(out, cap, "end %zu %016" PRIx64 "\n", count, fnv(body, strlen(body)));
}

/* Checks the file at path is a valid version-1 file with sorted unique keys; returns its entry
 * count. */
static size_t check_file(const char *path)
{
    size_t n = 0;
    char *text = read_text(path, &n);
    assert_non_null(text);
    assert_int_equal(strncmp(text, "rudnn-autotune 1\n", 17), 0);
    char *end = text + n;
    assert_true(n > 0 && end[-1] == '\n');
    char *last = end - 1;
    while (last > text && last[-1] != '\n')
        last--;
    unsigned long long count = 0;
    char hex[17] = "";
    assert_int_equal(sscanf(last, "end %llu %16s", &count, hex), 2);
    char want[32];
    snprintf(want, sizeof want, "%016" PRIx64, fnv(text, (size_t)(last - text)));
    assert_string_equal(hex, want);
    size_t lines = 0;
    char prev[RUDNN_AUTOTUNE_KEY_MAX] = "";
    for (char *p = text + 17; p < last; lines++) {
        char *nl = strchr(p, '\n');
        char *tab = memchr(p, '\t', (size_t)(nl - p));
        assert_non_null(tab);
        *tab = '\0';
        assert_true(lines == 0 || strcmp(prev, p) < 0);
        snprintf(prev, sizeof prev, "%s", p);
        p = nl + 1;
    }
    assert_int_equal(lines, count);
    free(text);
    return lines;
}

/* ---- stderr capture ---- */

static int saved_stderr = -1;
static FILE *capture_file;

static void capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    assert_non_null(capture_file);
    saved_stderr = dup(2);
    dup2(fileno(capture_file), 2);
}

/* What stderr received since capture_begin (static buffer). */
static const char *capture_end(void)
{
    static char text[8192];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(capture_file);
    size_t n = fread(text, 1, sizeof text - 1, capture_file);
    text[n] = '\0';
    fclose(capture_file);
    return text;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* ---- child processes ---- */

/* Runs this binary with args under the extra environment (NAME=VALUE, or NAME= to unset);
 * returns its exit status; its stderr in err (cap bytes) when err is not NULL. */
static int run_child(const char *const *env, const char *const *args, char *err, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        for (; env && *env; env++) {
            char name[128];
            const char *eq = strchr(*env, '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - *env), *env);
            if (eq[1])
                setenv(name, eq + 1, 1);
            else
                unsetenv(name);
        }
        char *argv[8] = {(char *)self_path};
        for (int i = 0; args[i] && i < 6; i++)
            argv[i + 1] = (char *)args[i];
        execv(self_path, argv);
        _exit(127);
    }
    close(fds[1]);
    char buf[4096];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof buf - 1)
            got = 0; /* keep reading; only the tail matters */
    }
    buf[got] = '\0';
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (err)
        snprintf(err, cap, "%s", buf);
    if (buf[0])
        fprintf(stderr, "[child stderr] %s", buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* child-lookup KEY WINNER MS: the file named by RUDNN_AUTOTUNE_CACHE holds the entry. */
static int child_lookup(char **argv)
{
    char winner[RUDNN_AUTOTUNE_NAME_MAX];
    if (!rudnn_autotune_enabled() || !rudnn_autotune_lookup(argv[2], winner, sizeof winner) ||
        strcmp(winner, argv[3]) != 0) {
        fprintf(stderr, "child-lookup: %s not found\n", argv[2]);
        return 2;
    }
    char path[600];
    if (rudnn_autotune_cache_path(path, sizeof path) != RUDNN_STATUS_SUCCESS ||
        strcmp(path, getenv("RUDNN_AUTOTUNE_CACHE")) != 0)
        return 3;
    return 0;
}

/* child-off KEY: RUDNN_AUTOTUNE=off: nothing is looked up or stored. */
static int child_off(char **argv)
{
    char winner[RUDNN_AUTOTUNE_NAME_MAX];
    if (rudnn_autotune_enabled() != 0 || rudnn_autotune_is_enabled() != 0)
        return 2;
    if (rudnn_autotune_lookup(argv[2], winner, sizeof winner))
        return 3;
    rudnn_autotune_store("off|stored", "w.off", 1.0);
    return 0;
}

/* child-enabled: autotune is on (RUDNN_AUTOTUNE unset, "on" or unknown); asked three times. */
static int child_enabled(void)
{
    int on = rudnn_autotune_enabled() + rudnn_autotune_enabled() + rudnn_autotune_is_enabled();
    return on == 3 ? 0 : 2;
}

/* ---- tests: memory ---- */

static void test_memory_store_lookup(void **state)
{
    (void)state;
    rudnn_autotune_set_path_for_tests(""); /* memory only */
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    assert_false(rudnn_autotune_lookup("mem|a", w, sizeof w));
    rudnn_autotune_store("mem|a", "fam.first", 2.0);
    rudnn_autotune_store("mem|b", "fam.other", 1.0);
    assert_true(rudnn_autotune_lookup("mem|a", w, sizeof w));
    assert_string_equal(w, "fam.first");
    /* a newer winner replaces the older */
    rudnn_autotune_store("mem|a", "fam.second", 1.0);
    assert_true(rudnn_autotune_lookup("mem|a", w, sizeof w));
    assert_string_equal(w, "fam.second");
    assert_true(rudnn_autotune_lookup("mem|b", w, sizeof w));
    assert_string_equal(w, "fam.other");
    assert_false(rudnn_autotune_lookup("mem|c", w, sizeof w));
    /* a buffer too small for the name gets nothing, not a cut name */
    char small[4] = "xyz";
    assert_false(rudnn_autotune_lookup("mem|a", small, sizeof small));
    /* memory only: reset forgets */
    rudnn_autotune_reset();
    assert_false(rudnn_autotune_lookup("mem|a", w, sizeof w));
    const char *why = NULL;
    assert_int_equal(rudnn_autotune_each(NULL, NULL, &why), -1);
    assert_non_null(why);
}

static void test_bad_keys_ignored(void **state)
{
    (void)state;
    fresh_dir();
    char long_key[RUDNN_AUTOTUNE_KEY_MAX + 1];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0'; /* KEY_MAX characters: one too many */
    char long_name[RUDNN_AUTOTUNE_NAME_MAX + 1];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    rudnn_autotune_store("a\tb", "w", 1.0);
    rudnn_autotune_store("a\nb", "w", 1.0);
    rudnn_autotune_store("", "w", 1.0);
    rudnn_autotune_store(NULL, "w", 1.0);
    rudnn_autotune_store(long_key, "w", 1.0);
    rudnn_autotune_store("good|key", "w\tx", 1.0);
    rudnn_autotune_store("good|key", "w\n", 1.0);
    rudnn_autotune_store("good|key", long_name, 1.0);
    rudnn_autotune_store("good|key", "", 1.0);
    rudnn_autotune_store("good|key", NULL, 1.0);
    rudnn_autotune_store("good|key", "w", NAN);
    rudnn_autotune_store("good|key", "w", -1.0);
    rudnn_autotune_store("good|key", "w", INFINITY);
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    assert_false(rudnn_autotune_lookup("good|key", w, sizeof w));
    assert_false(rudnn_autotune_lookup("a\tb", w, sizeof w));
    assert_false(rudnn_autotune_lookup(NULL, w, sizeof w));
    assert_false(rudnn_autotune_lookup(long_key, w, sizeof w));
    struct stat st;
    assert_int_equal(stat(tmp_file, &st), -1); /* nothing was written */

    /* the longest valid key and name go through the file */
    long_key[RUDNN_AUTOTUNE_KEY_MAX - 1] = '\0';
    long_name[RUDNN_AUTOTUNE_NAME_MAX - 1] = '\0';
    rudnn_autotune_store(long_key, long_name, 1e9);
    rudnn_autotune_reset();
    assert_true(rudnn_autotune_lookup(long_key, w, sizeof w));
    assert_string_equal(w, long_name);
    assert_int_equal(check_file(tmp_file), 1);
}

/* ---- tests: the file ---- */

typedef struct seen {
    int count;
    char keys[8][RUDNN_AUTOTUNE_KEY_MAX];
    double ms[8];
} seen_t;

static void collect(void *arg, const char *key, const char *winner, double ms)
{
    (void)winner;
    seen_t *s = arg;
    if (s->count < 8) {
        snprintf(s->keys[s->count], sizeof s->keys[0], "%s", key);
        s->ms[s->count] = ms;
    }
    s->count++;
}

static void test_file_second_process(void **state)
{
    (void)state;
    fresh_dir();
    rudnn_autotune_store("op|b|dev|drv|z", "fam.z", 3.0);
    rudnn_autotune_store("op|b|dev|drv|a", "fam.a", 1.234567);
    rudnn_autotune_store("op|b|dev|drv|m", "fam.m", 0.000123);
    assert_int_equal(check_file(tmp_file), 3);

    /* this process, from the file only */
    rudnn_autotune_reset();
    seen_t s = {0};
    const char *why = "unset";
    assert_int_equal(rudnn_autotune_each(collect, &s, &why), 3);
    assert_null(why);
    assert_string_equal(s.keys[0], "op|b|dev|drv|a"); /* key order */
    assert_string_equal(s.keys[2], "op|b|dev|drv|z");
    assert_true(fabs(s.ms[0] - 1.234567) < 1e-9);
    assert_true(fabs(s.ms[1] - 0.000123) < 1e-9);

    /* another process finds each entry through RUDNN_AUTOTUNE_CACHE without timing anything */
    char env_cache[700];
    snprintf(env_cache, sizeof env_cache, "RUDNN_AUTOTUNE_CACHE=%s", tmp_file);
    const char *env[] = {env_cache, "RUDNN_AUTOTUNE=", NULL};
    const char *a1[] = {"child-lookup", "op|b|dev|drv|a", "fam.a", NULL};
    const char *a2[] = {"child-lookup", "op|b|dev|drv|z", "fam.z", NULL};
    const char *a3[] = {"child-lookup", "op|b|dev|drv|missing", "fam.a", NULL};
    char err[4096];
    assert_int_equal(run_child(env, a1, err, sizeof err), 0);
    assert_int_equal(count_of(err, "autotune cache"), 0); /* no warning on a good file */
    assert_int_equal(run_child(env, a2, NULL, 0), 0);
    assert_int_equal(run_child(env, a3, NULL, 0), 2); /* the check can fail */
}

/* A valid file of two entries whose second winner is "fam.alpha". */
static void valid_text(char *out, size_t cap)
{
    const char *body = "rudnn-autotune 1\nk|1\tfam.one\t1.000000\nk|2\tfam.alpha\t2.500000\n";
    char trailer[64];
    trailer_for(trailer, sizeof trailer, body, 2);
    snprintf(out, cap, "%s%s", body, trailer);
}

/* body + its correct trailer (count entries), so that only the body's fault remains. */
static void with_trailer(char *out, size_t cap, const char *body, size_t count)
{
    char trailer[64];
    trailer_for(trailer, sizeof trailer, body, count);
    snprintf(out, cap, "%s%s", body, trailer);
}

enum { BAD_FLIPPED, BAD_NO_TRAILER, BAD_CUT_LINE, BAD_VERSION, BAD_FORMAT, BAD_OVERSIZE, BAD_EMPTY,
       BAD_MALFORMED, BAD_COUNT, BAD_AFTER_TRAILER, BAD_UNREADABLE, BAD_CASES };
static const char *const bad_reasons[BAD_CASES] = {
    "checksum mismatch", "truncated (no trailer line)", "truncated (no trailer line)",
    "format version '99', this library reads 1", "not a rudnn-autotune file", "line 3 longer than",
    "empty file", "line 2 malformed", "trailer counts 3 entries, the file holds 2",
    "data after the trailer line", "cannot open it",
};

static size_t bad_text(int which, char *out, size_t cap)
{
    valid_text(out, cap);
    char *p;
    switch (which) {
    case BAD_FLIPPED: /* one letter of an entry the test does not look up */
        p = strstr(out, "alpha");
        p[0] = 'b';
        break;
    case BAD_NO_TRAILER:
        *strstr(out, "end ") = '\0';
        break;
    case BAD_CUT_LINE:
        strstr(out, "fam.alpha")[4] = '\0';
        break;
    case BAD_VERSION:
        with_trailer(out, cap, "rudnn-autotune 99\nk|1\tfam.one\t1.000000\n", 1);
        break;
    case BAD_FORMAT:
        snprintf(out, cap, "{\"k|1\": \"fam.one\"}\n");
        break;
    case BAD_OVERSIZE: {
        char body[6000] = "rudnn-autotune 1\nk|1\tfam.one\t1.000000\n";
        size_t n = strlen(body);
        memset(body + n, 'x', 5000);
        memcpy(body + n + 5000, "\tw\t1.000000\n", 13);
        with_trailer(out, cap, body, 2);
        break;
    }
    case BAD_EMPTY:
        out[0] = '\0';
        break;
    case BAD_MALFORMED:
        with_trailer(out, cap, "rudnn-autotune 1\nk|1 fam.one 1.000000\n", 1);
        break;
    case BAD_COUNT:
        with_trailer(out, cap, "rudnn-autotune 1\nk|1\tfam.one\t1.000000\nk|2\tfam.two\t1.000000\n", 3);
        break;
    case BAD_AFTER_TRAILER:
        strcat(out, "k|3\tfam.three\t1.000000\n");
        break;
    default:
        break;
    }
    return strlen(out);
}

static void test_bad_files(void **state)
{
    (void)state;
    for (int c = 0; c < BAD_CASES; c++) {
        if (c == BAD_UNREADABLE && geteuid() == 0) {
            print_message("bad file %d (unreadable): skipped, root reads any file\n", c);
            continue;
        }
        fresh_dir();
        char text[8192];
        size_t n = bad_text(c, text, sizeof text);
        write_text(tmp_file, text, n);
        if (c == BAD_UNREADABLE)
            assert_int_equal(chmod(tmp_file, 0), 0);
        capture_begin();
        char w[RUDNN_AUTOTUNE_NAME_MAX];
        int found = rudnn_autotune_lookup("k|1", w, sizeof w);
        found += rudnn_autotune_lookup("k|1", w, sizeof w);
        rudnn_autotune_reset(); /* read again: still one warning per process */
        found += rudnn_autotune_lookup("k|1", w, sizeof w);
        rudnn_autotune_store("k|new", "fam.new", 1.0); /* reads it once more, under the lock */
        const char *err = capture_end();
        char want[1024];
        snprintf(want, sizeof want, "rudnn: autotune cache %s ignored: %s", tmp_file, bad_reasons[c]);
        if (count_of(err, want) != 1 || count_of(err, "rudnn: autotune cache") != 1 ||
            !strstr(err, "; it will be rewritten\n"))
            fail_msg("bad file %d: expected one warning '%s', stderr was: %s", c, want, err);
        assert_int_equal(found, 0); /* never trusted, even for a line that reads well */
        /* replaced by a valid file holding only the new entry */
        if (c == BAD_UNREADABLE)
            chmod(tmp_file, 0644);
        assert_int_equal(check_file(tmp_file), 1);
        rudnn_autotune_reset();
        assert_true(rudnn_autotune_lookup("k|new", w, sizeof w));
        assert_false(rudnn_autotune_lookup("k|1", w, sizeof w));
        teardown_dir(NULL);
    }
    /* and the unmodified valid text is trusted: the cases above fail for their fault alone */
    fresh_dir();
    char text[8192];
    valid_text(text, sizeof text);
    write_text(tmp_file, text, strlen(text));
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    capture_begin();
    int found = rudnn_autotune_lookup("k|2", w, sizeof w);
    const char *err = capture_end();
    assert_true(found);
    assert_string_equal(w, "fam.alpha");
    assert_string_equal(err, "");
}

static void test_unwritable(void **state)
{
    (void)state;
    fresh_dir();
    /* a folder that cannot be made (under a regular file): fails even for root */
    char blocker[700], path[800];
    snprintf(blocker, sizeof blocker, "%s/plainfile", tmp_dir);
    write_text(blocker, "x", 1);
    snprintf(path, sizeof path, "%s/cache/autotune.txt", blocker);
    rudnn_autotune_set_path_for_tests(path);
    capture_begin();
    rudnn_autotune_store("u|1", "fam.one", 1.0);
    rudnn_autotune_store("u|2", "fam.two", 2.0);
    const char *err = capture_end();
    assert_int_equal(count_of(err, "not written"), 1);
    assert_non_null(strstr(err, path));
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    assert_true(rudnn_autotune_lookup("u|1", w, sizeof w)); /* still holds in memory */
    assert_true(rudnn_autotune_lookup("u|2", w, sizeof w));
    const char *why = NULL;
    seen_t s = {0};
    assert_int_equal(rudnn_autotune_each(collect, &s, &why), 2); /* memory, with the reason */
    assert_non_null(why);
}

/* N processes store M keys each at the same moment; the file ends with all N*M. */
#define WRITERS 8
#define KEYS_EACH 25

static void test_concurrent_writers(void **state)
{
    (void)state;
    fresh_dir();
    rudnn_autotune_store("conc|before", "fam.before", 1.0); /* an entry that must survive too */
    int go[2];
    assert_int_equal(pipe(go), 0);
    fflush(NULL);
    pid_t pids[WRITERS];
    for (int p = 0; p < WRITERS; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            close(go[1]);
            char c;
            while (read(go[0], &c, 1) < 0 && errno == EINTR) {
            }
            for (int k = 0; k < KEYS_EACH; k++) {
                char key[64], win[32];
                snprintf(key, sizeof key, "conc|p%d|k%d", p, k);
                snprintf(win, sizeof win, "fam.w%d", p);
                rudnn_autotune_store(key, win, 0.5 + k);
            }
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]); /* every writer starts now */
    for (int p = 0; p < WRITERS; p++) {
        int status;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(check_file(tmp_file), WRITERS * KEYS_EACH + 1);
    rudnn_autotune_reset();
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    for (int p = 0; p < WRITERS; p++)
        for (int k = 0; k < KEYS_EACH; k++) {
            char key[64], win[32];
            snprintf(key, sizeof key, "conc|p%d|k%d", p, k);
            snprintf(win, sizeof win, "fam.w%d", p);
            assert_true(rudnn_autotune_lookup(key, w, sizeof w));
            assert_string_equal(w, win);
        }
    assert_true(rudnn_autotune_lookup("conc|before", w, sizeof w));
    /* no temporary file is left behind: only the file and its lock */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sub/dir", tmp_dir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int others = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "autotune.txt") &&
            strcmp(e->d_name, "autotune.txt.lock"))
            others++;
    closedir(d);
    assert_int_equal(others, 0);
}

/* Threads of one process store and look up at once (the mutex; TSan checks it). */
#define THREADS 4
static void *thread_work(void *arg)
{
    int t = (int)(intptr_t)arg;
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    for (int k = 0; k < 20; k++) {
        char key[64];
        snprintf(key, sizeof key, "thr|t%d|k%d", t, k);
        rudnn_autotune_store(key, "fam.t", 1.0);
        if (!rudnn_autotune_lookup(key, w, sizeof w))
            return (void *)1;
        snprintf(key, sizeof key, "thr|t%d|k%d", (t + 1) % THREADS, k);
        rudnn_autotune_lookup(key, w, sizeof w);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    fresh_dir();
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, thread_work, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        assert_null(r);
    }
    assert_int_equal(check_file(tmp_file), THREADS * 20);
}

/* RUDNN_AUTOTUNE is read once per process: each value in a child of its own. */
static void test_env_switch(void **state)
{
    (void)state;
    fresh_dir();
    rudnn_autotune_store("env|k", "fam.k", 1.0);
    char env_cache[700];
    snprintf(env_cache, sizeof env_cache, "RUDNN_AUTOTUNE_CACHE=%s", tmp_file);
    char err[4096];

    const char *off[] = {env_cache, "RUDNN_AUTOTUNE=off", NULL};
    const char *off_args[] = {"child-off", "env|k", NULL};
    assert_int_equal(run_child(off, off_args, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(check_file(tmp_file), 1); /* the child's store wrote nothing */
    /* the same child without the variable finds the key: the check can fail */
    const char *on_unset[] = {env_cache, "RUDNN_AUTOTUNE=", NULL};
    assert_int_equal(run_child(on_unset, off_args, NULL, 0), 2);

    const char *en_args[] = {"child-enabled", NULL};
    const char *on[] = {env_cache, "RUDNN_AUTOTUNE=on", NULL};
    assert_int_equal(run_child(on, en_args, err, sizeof err), 0);
    assert_string_equal(err, "");
    const char *bogus[] = {env_cache, "RUDNN_AUTOTUNE=fast", NULL};
    assert_int_equal(run_child(bogus, en_args, err, sizeof err), 0);
    assert_int_equal(count_of(err, "rudnn: RUDNN_AUTOTUNE=fast is neither \"on\" nor \"off\""), 1);
    assert_int_equal(count_of(err, "rudnn:"), 1); /* once, though asked three times */
}

/* ---- tests with a backend ---- */

/* What rudnn_autotune_key must make of a part. */
static void sanitized(char *out, const char *in, int keep_bars)
{
    for (; *in; in++)
        *out++ = ((unsigned char)*in < 0x20 || *in == 0x7f || (*in == '|' && !keep_bars)) ? '_' : *in;
    *out = '\0';
}

static void test_key(void **state)
{
    (void)state;
    rudnn_device_info_t info;
    rt_assert_status(rudnn_context_device_info(rt_ctx, &info), RUDNN_STATUS_SUCCESS);
    char key[RUDNN_AUTOTUNE_KEY_MAX];
    rt_assert_status(rudnn_autotune_key(key, sizeof key, "att|n\n", rt_ctx, "bf16|b1\th2"),
                     RUDNN_STATUS_SUCCESS);
    char b[64], name[RUDNN_NAME_MAX], drv[RUDNN_NAME_MAX], want[1200];
    sanitized(b, info.backend, 0);
    sanitized(name, info.name, 0);
    sanitized(drv, info.driver, 0);
    snprintf(want, sizeof want, "att_n_|%s|%s|%s|bf16|b1_h2", b, name, drv);
    assert_string_equal(key, want);
    assert_int_equal(count_of(key, "|"), 5); /* four separators, and rest's own */
    /* usable as it is */
    rudnn_autotune_set_path_for_tests("");
    rudnn_autotune_store(key, "att.x", 1.0);
    char w[RUDNN_AUTOTUNE_NAME_MAX];
    assert_true(rudnn_autotune_lookup(key, w, sizeof w));
    /* rest NULL: an empty last part */
    rt_assert_status(rudnn_autotune_key(key, sizeof key, "op", rt_ctx, NULL), RUDNN_STATUS_SUCCESS);
    assert_int_equal(key[strlen(key) - 1], '|');

    char rest[RUDNN_AUTOTUNE_KEY_MAX + 8];
    memset(rest, 'r', sizeof rest - 1);
    rest[sizeof rest - 1] = '\0';
    rt_assert_status(rudnn_autotune_key(key, sizeof key, "op", rt_ctx, rest), RUDNN_STATUS_BAD_PARAM);
    assert_string_equal(key, "");
    assert_non_null(strstr(rudnn_last_error(), "longer than"));
    char tiny[8];
    rt_assert_status(rudnn_autotune_key(tiny, sizeof tiny, "op", rt_ctx, ""), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_autotune_key(key, sizeof key, "op", NULL, ""), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_autotune_key(key, sizeof key, NULL, rt_ctx, ""), RUDNN_STATUS_BAD_PARAM);
    rudnn_autotune_set_path_for_tests(NULL);
}

/* Candidates: "slow" fills many bytes, "fast" a few, "fail" asks an impossible fill. */
enum { C_SLOW, C_FAST, C_FAIL };
typedef struct fake {
    rudnn_buffer_t buf;
    size_t big;
    int kinds[4];
    int calls[4];
    rudnn_status_t fail_status;
} fake_t;

static rudnn_status_t fake_run(void *arg, int i)
{
    fake_t *f = arg;
    f->calls[i]++;
    switch (f->kinds[i]) {
    case C_SLOW:
        return rudnn_buffer_fill(rt_queue, f->buf, 0, (uint8_t)i, f->big);
    case C_FAST:
        return rudnn_buffer_fill(rt_queue, f->buf, 0, (uint8_t)i, 256);
    default:
        return f->fail_status = rudnn_buffer_fill(rt_queue, f->buf, f->big, 0, 1); /* past the end */
    }
}

static void test_time_picks_faster(void **state)
{
    (void)state;
    fake_t f = {.big = (size_t)64 << 20};
    rt_assert_status(rudnn_buffer_create(rt_ctx, f.big, &f.buf), RUDNN_STATUS_SUCCESS);
    const int reps = 5;
    int best = -1;
    double ms = -1;

    /* the fast one last, a failing one between */
    f.kinds[0] = C_SLOW, f.kinds[1] = C_FAIL, f.kinds[2] = C_FAST;
    rt_assert_status(rudnn_autotune_time(rt_queue, 3, fake_run, &f, reps, &best, &ms), RUDNN_STATUS_SUCCESS);
    assert_int_equal(best, 2);
    assert_true(ms >= 0.0);
    assert_int_equal(f.calls[0], 1 + reps); /* warm-up, then the timed runs */
    assert_int_equal(f.calls[1], 1);        /* failed its warm-up: skipped */
    assert_int_equal(f.calls[2], 1 + reps);
    assert_int_not_equal(f.fail_status, RUDNN_STATUS_SUCCESS);

    /* the fast one first: not simply the last that ran */
    memset(f.calls, 0, sizeof f.calls);
    f.kinds[0] = C_FAST, f.kinds[1] = C_SLOW;
    rt_assert_status(rudnn_autotune_time(rt_queue, 2, fake_run, &f, reps, &best, &ms), RUDNN_STATUS_SUCCESS);
    assert_int_equal(best, 0);

    /* none runs: the last failure's status, and a message naming it */
    f.kinds[0] = C_FAIL, f.kinds[1] = C_FAIL;
    rudnn_status_t st = rudnn_autotune_time(rt_queue, 2, fake_run, &f, reps, &best, &ms);
    assert_int_equal(st, f.fail_status);
    assert_non_null(strstr(rudnn_last_error(), "none of the 2 candidate(s) ran; candidate 1: "));

    /* bad arguments */
    rt_assert_status(rudnn_autotune_time(rt_queue, 0, fake_run, &f, reps, &best, &ms), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_autotune_time(rt_queue, 1, fake_run, &f, 0, &best, &ms), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_autotune_time(NULL, 1, fake_run, &f, 1, &best, &ms), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_autotune_time(rt_queue, 1, NULL, &f, 1, &best, &ms), RUDNN_STATUS_BAD_PARAM);
    rudnn_buffer_destroy(f.buf);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc >= 4 && strcmp(argv[1], "child-lookup") == 0)
        return child_lookup(argv);
    if (argc >= 3 && strcmp(argv[1], "child-off") == 0)
        return child_off(argv);
    if (argc >= 2 && strcmp(argv[1], "child-enabled") == 0)
        return child_enabled();

    const char *mode = argc >= 2 ? argv[1] : "file";
    if (strcmp(mode, "file") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_memory_store_lookup, teardown_dir),
            cmocka_unit_test_teardown(test_bad_keys_ignored, teardown_dir),
            cmocka_unit_test_teardown(test_file_second_process, teardown_dir),
            cmocka_unit_test_teardown(test_bad_files, teardown_dir),
            cmocka_unit_test_teardown(test_unwritable, teardown_dir),
            cmocka_unit_test_teardown(test_concurrent_writers, teardown_dir),
            cmocka_unit_test_teardown(test_threads, teardown_dir),
            cmocka_unit_test_teardown(test_env_switch, teardown_dir),
        };
        return cmocka_run_group_tests_name("autotune-file", tests, NULL, NULL);
    }
    if (strcmp(mode, "time") == 0) {
        rt_open_or_skip("autotune-time");
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_key),
            cmocka_unit_test(test_time_picks_faster),
        };
        return cmocka_run_group_tests_name("autotune-time", tests, NULL, rt_group_teardown);
    }
    fprintf(stderr, "usage: test_autotune file|time\n");
    return 1;
}
