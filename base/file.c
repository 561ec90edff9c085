/* file.c - durable file helpers, identifiers and randomness. */
#include "st_base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

st_err_t st_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return st_err_from_errno(errno);
    st_err_t e = fsync(fd) == 0 ? ST_OK : st_err_from_errno(errno);
    close(fd);
    return e;
}

st_err_t st_mkdirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return st_err_from_errno(errno);
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return st_err_from_errno(errno);
    return ST_OK;
}

st_err_t st_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? ST_OK : st_err_from_errno(errno);
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return st_err_from_errno(errno);
        struct dirent *de;
        st_err_t e = ST_OK;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, de->d_name);
            st_err_t ce = st_rmtree(child);
            if (ce && !e) e = ce;
        }
        closedir(d);
        if (e) return e;
        return rmdir(path) == 0 ? ST_OK : st_err_from_errno(errno);
    }
    return unlink(path) == 0 ? ST_OK : st_err_from_errno(errno);
}

st_err_t st_pwrite_all(int fd, const void *p, size_t n, int64_t off) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = pwrite(fd, b, n, off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return st_err_from_errno(errno);
        }
        b += w;
        n -= (size_t)w;
        off += w;
    }
    return ST_OK;
}

st_err_t st_pread_all(int fd, void *p, size_t n, int64_t off, size_t *got) {
    uint8_t *b = p;
    size_t total = 0;
    while (total < n) {
        ssize_t r = pread(fd, b + total, n - total, off + (int64_t)total);
        if (r < 0) {
            if (errno == EINTR) continue;
            return st_err_from_errno(errno);
        }
        if (r == 0) break;
        total += (size_t)r;
    }
    if (got) *got = total;
    return ST_OK;
}

st_err_t st_write_file_atomic(const char *path, const void *data, size_t len) {
    char tmp[4096], dir[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return st_err_from_errno(errno);
    st_err_t e = st_pwrite_all(fd, data, len, 0);
    if (!e && fsync(fd) != 0) e = st_err_from_errno(errno);
    close(fd);
    if (!e && rename(tmp, path) != 0) e = st_err_from_errno(errno);
    if (e) {
        unlink(tmp);
        return e;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    return st_fsync_dir(slash == dir ? "/" : dir);
}

st_err_t st_read_file(const char *path, char **out, size_t *outlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_err_from_errno(errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int en = errno;
        close(fd);
        return st_err_from_errno(en);
    }
    char *buf = st_malloc((size_t)st.st_size + 1);
    size_t got = 0;
    st_err_t e = st_pread_all(fd, buf, (size_t)st.st_size, 0, &got);
    close(fd);
    if (e) {
        free(buf);
        return e;
    }
    buf[got] = 0;
    *out = buf;
    if (outlen) *outlen = got;
    return ST_OK;
}

void st_random_bytes(void *p, size_t n) {
    uint8_t *b = p;
    while (n) {
        ssize_t r = getrandom(b, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            abort();
        }
        b += r;
        n -= (size_t)r;
    }
}

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void st_uuid_random(st_uuid_t *u) {
    do {
        st_random_bytes(u->b, 16);
        /* Kafka's Uuid.randomUuid is a version 4 UUID and never starts with '-'. */
        u->b[6] = (uint8_t)((u->b[6] & 0x0f) | 0x40);
        u->b[8] = (uint8_t)((u->b[8] & 0x3f) | 0x80);
    } while (st_uuid_is_zero(u) || (u->b[0] >> 2) == 62);
}

int st_uuid_is_zero(const st_uuid_t *u) {
    for (int i = 0; i < 16; i++)
        if (u->b[i]) return 0;
    return 1;
}

void st_uuid_format(const st_uuid_t *u, char out[23]) {
    int o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (int i = 0; i < 16; i++) {
        acc = (acc << 8) | u->b[i];
        bits += 8;
        while (bits >= 6) {
            out[o++] = b64url[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits) out[o++] = b64url[(acc << (6 - bits)) & 63];
    out[o] = 0;
}

int st_uuid_parse(const char *s, st_uuid_t *u) {
    if (strlen(s) != 22) return -1;
    uint32_t acc = 0;
    int bits = 0, o = 0;
    for (int i = 0; i < 22; i++) {
        const char *c = strchr(b64url, s[i]);
        if (!c || !s[i]) return -1;
        acc = (acc << 6) | (uint32_t)(c - b64url);
        bits += 6;
        if (bits >= 8) {
            if (o < 16) u->b[o++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return o == 16 ? 0 : -1;
}
