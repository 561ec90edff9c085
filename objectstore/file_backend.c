/*
 * file_backend.c - a local directory standing for the bucket.
 *
 * Owns everything under objectstore.file.root.  Requests run on a small
 * thread pool (objectstore.file.threads); each is one blocking operation.
 *
 * Key -> path.  A key is split at '/'; each piece is escaped (bytes outside
 * [A-Za-z0-9._-], and a leading '.', become %XX; an empty piece becomes a
 * lone "%").  Directory names get an '@' suffix, which an escaped piece can
 * never end with, so "a" (an object) and "a/b" (an object under "a/") can
 * both exist, as S3 allows:
 *
 *     key "topic-0/00000000000000000000.log"
 *     ->  <root>/topic-0@/00000000000000000000.log
 *
 * Names starting with '.' are never produced by escaping; the layer keeps
 * its temporary files in <root>/.strata-tmp/.
 *
 * Object file.  Every object file starts with a header that carries the
 * object's size, its CRC32C and its user metadata (big-endian):
 *
 *     offset  size  field
 *     0       4     magic "STOB"
 *     4       2     version (1)
 *     6       2     header length H, checksum included
 *     8       8     object size in bytes
 *     16      4     CRC32C of the object's bytes
 *     20      2     number of metadata entries M
 *     22      ...   M times: name length (2), name, value length (2), value
 *     H-4     4     CRC32C of header bytes [0, H-4)
 *     H       ...   the object's bytes; the file is exactly H + size long
 *
 * Invariants:
 *   - an object file appears only complete: put writes a temporary file,
 *     fsyncs it, renames it into place and fsyncs the directory (and the
 *     parents of directories it created);
 *   - listing walks directories in key order (a directory's entries sorted
 *     by key, a directory "d" sorting as "d/"), so pages come out sorted the
 *     way S3 sorts (bytewise);
 *   - empty directories left by deletes are removed, best effort; a put
 *     that loses its directory to such a removal recreates it and retries.
 */
#include "objectstore_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAGIC "STOB"
#define FILE_VERSION 1
#define FILE_HDR_FIXED 22
#define FILE_HDR_MAX 4096
#define FILE_TMP_DIR ".strata-tmp"
#define FILE_COPY_CHUNK (1024 * 1024)
#define FILE_PATH_MAX 4096
/* Our reasons name at most one path (the root's, a key's or an object
 * file's) besides fixed words: sized to fit them. */
#define FILE_WHY_MAX (FILE_PATH_MAX + 256)
/* Temporary files older than this are left over from a crash. */
#define FILE_TMP_STALE_S 3600

typedef struct file_os {
    st_os_t *os;
    st_pool_t *pool;
    char root[FILE_PATH_MAX];
    char tmpdir[FILE_PATH_MAX];
    int fsync;
    atomic_int closing;
} file_os_t;

/* ------------------------------------------------------------------------
 * Key mapping
 * ---------------------------------------------------------------------- */

static int plain_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int st_os__file_encode_component(const char *comp, size_t n, char *out, size_t outlen) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (n == 0) {
        if (outlen < 2) return -1;
        out[0] = '%';
        out[1] = 0;
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)comp[i];
        if (plain_char(c) && !(i == 0 && c == '.')) {
            if (o + 1 >= outlen) return -1;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= outlen) return -1;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
    return (int)o;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Only the canonical spelling decodes, so two names never map to one key. */
int st_os__file_decode_component(const char *name, char *out, size_t outlen) {
    size_t o = 0;
    if (!strcmp(name, "%")) {
        if (outlen < 1) return -1;
        out[0] = 0;
        return 0;
    }
    if (!*name) return -1;
    for (size_t i = 0; name[i]; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '%') {
            int h = hexval(name[i + 1]), l = h < 0 ? -1 : hexval(name[i + 2]);
            if (h < 0 || l < 0) return -1;
            unsigned char d = (unsigned char)(h * 16 + l);
            if (d == 0 || (plain_char(d) && !(i == 0 && d == '.'))) return -1;
            c = d;
            i += 2;
        } else if (!plain_char(c) || (i == 0 && c == '.')) {
            return -1;
        }
        if (o + 1 >= outlen) return -1;
        out[o++] = (char)c;
    }
    out[o] = 0;
    return (int)o;
}

/* path of key under root; dirs[i] = length of the path of the i-th
 * directory level (so path[0..dirs[i]) is that directory). */
typedef struct key_path {
    char path[FILE_PATH_MAX];
    size_t dirs[ST_OS_KEY_MAX + 1];
    int ndirs;
} key_path_t;

static int make_key_path(const file_os_t *fo, const char *key, key_path_t *kp, char *why,
                         size_t whylen) {
    size_t o = (size_t)snprintf(kp->path, sizeof kp->path, "%s", fo->root);
    kp->ndirs = 0;
    const char *p = key;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char enc[NAME_MAX + 8];
        int len = st_os__file_encode_component(p, n, enc, sizeof enc);
        if (len < 0 || len + 1 > NAME_MAX) {
            snprintf(why, whylen,
                     "a piece of the key between '/' is too long for a file name once escaped");
            return -1;
        }
        if (o + 2 + (size_t)len + 1 >= sizeof kp->path) {
            snprintf(why, whylen, "the key is too long for a path under %s", fo->root);
            return -1;
        }
        kp->path[o++] = '/';
        memcpy(kp->path + o, enc, (size_t)len);
        o += (size_t)len;
        if (!slash) break;
        kp->path[o++] = '@';
        kp->dirs[kp->ndirs++] = o;
        p = slash + 1;
    }
    kp->path[o] = 0;
    return 0;
}

/* ------------------------------------------------------------------------
 * Object file header
 * ---------------------------------------------------------------------- */

typedef struct obj_hdr {
    uint32_t hlen;
    uint64_t size;
    uint32_t crc;
    st_os_meta_t *meta;
    size_t nmeta;
} obj_hdr_t;

static size_t header_size(const st_os_request_t *rq) {
    size_t n = FILE_HDR_FIXED + 4;
    for (size_t i = 0; i < rq->nmeta; i++)
        n += 4 + strlen(rq->meta[i].name) + strlen(rq->meta[i].value);
    return n;
}

static void header_encode(const st_os_request_t *rq, uint64_t size, uint32_t crc, uint8_t *h,
                          size_t hlen) {
    memcpy(h, FILE_MAGIC, 4);
    st_be16_put(h + 4, FILE_VERSION);
    st_be16_put(h + 6, (uint16_t)hlen);
    st_be64_put(h + 8, size);
    st_be32_put(h + 16, crc);
    st_be16_put(h + 20, (uint16_t)rq->nmeta);
    size_t o = FILE_HDR_FIXED;
    for (size_t i = 0; i < rq->nmeta; i++) {
        size_t nl = strlen(rq->meta[i].name), vl = strlen(rq->meta[i].value);
        st_be16_put(h + o, (uint16_t)nl);
        memcpy(h + o + 2, rq->meta[i].name, nl);
        o += 2 + nl;
        st_be16_put(h + o, (uint16_t)vl);
        memcpy(h + o + 2, rq->meta[i].value, vl);
        o += 2 + vl;
    }
    st_be32_put(h + o, st_crc32c(0, h, o));
}

/* Reads and checks the header of an open object file.  Returns ST_OK,
 * ST_E_CORRUPT (why says what) or an errno-derived error. */
static st_err_t header_read(st_os_req_t *req, int fd, const struct stat *st, obj_hdr_t *hd,
                            char *why, size_t whylen) {
    uint8_t buf[FILE_HDR_MAX];
    size_t got = 0;
    st_err_t e = st_pread_all(fd, buf, sizeof buf, 0, &got);
    if (e) {
        snprintf(why, whylen, "cannot read: %s", strerror(errno));
        return e;
    }
    st_rd_t r;
    st_rd_init(&r, buf, got);
    const uint8_t *magic = st_rd_bytes(&r, 4);
    int16_t version = st_rd_i16(&r);
    uint16_t hlen = (uint16_t)st_rd_i16(&r);
    uint64_t size = (uint64_t)st_rd_i64(&r);
    uint32_t crc = (uint32_t)st_rd_i32(&r);
    uint16_t nmeta = (uint16_t)st_rd_i16(&r);
    if (r.err || memcmp(magic, FILE_MAGIC, 4) != 0) {
        snprintf(why, whylen, "not an object file (bad magic or too short)");
        return ST_CORRUPT_BKPT;
    }
    if (version != FILE_VERSION) {
        snprintf(why, whylen, "object file version %d is not supported", version);
        return ST_CORRUPT_BKPT;
    }
    if (hlen < FILE_HDR_FIXED + 4 || hlen > got) {
        snprintf(why, whylen, "header length %u is impossible", hlen);
        return ST_CORRUPT_BKPT;
    }
    if (st_be32_get(buf + hlen - 4) != st_crc32c(0, buf, hlen - 4u)) {
        snprintf(why, whylen, "header checksum mismatch");
        return ST_CORRUPT_BKPT;
    }
    if ((uint64_t)st->st_size != hlen + size) {
        snprintf(why, whylen, "file is %lld bytes, header says %llu + %u",
                 (long long)st->st_size, (unsigned long long)size, hlen);
        return ST_CORRUPT_BKPT;
    }
    st_rd_init(&r, buf, hlen - 4u);
    st_rd_bytes(&r, FILE_HDR_FIXED);
    hd->meta = nmeta && req ? st_os__alloc(req, nmeta * sizeof *hd->meta) : NULL;
    for (uint16_t i = 0; i < nmeta; i++) {
        uint16_t nl = (uint16_t)st_rd_i16(&r);
        const uint8_t *name = st_rd_bytes(&r, nl);
        uint16_t vl = (uint16_t)st_rd_i16(&r);
        const uint8_t *value = st_rd_bytes(&r, vl);
        if (r.err) break;
        if (hd->meta) {
            hd->meta[i].name = st_arena_strndup(&req->arena, (const char *)name, nl);
            hd->meta[i].value = st_arena_strndup(&req->arena, (const char *)value, vl);
        }
    }
    if (r.err || st_rd_left(&r) != 0) {
        snprintf(why, whylen, "metadata entries do not fill the header");
        return ST_CORRUPT_BKPT;
    }
    hd->hlen = hlen;
    hd->size = size;
    hd->crc = crc;
    hd->nmeta = nmeta;
    return ST_OK;
}

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

/* Errors that may pass by themselves are retryable; the rest permanent. */
static st_err_t errno_status(int en) {
    switch (en) {
    case ENOSPC:
    case EDQUOT:
    case EAGAIN:
    case EINTR:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EBUSY: return ST_E_RETRYABLE;
    default: return ST_E_PERMANENT;
    }
}

/* The bucket directory must exist: puts must not silently create it. */
static int root_missing(st_os_req_t *req, file_os_t *fo) {
    struct stat st;
    int rc = stat(fo->root, &st), en = errno;
    if (rc == 0 && S_ISDIR(st.st_mode)) return 0;
    if (rc == 0 || en == ENOENT || en == ENOTDIR)
        st_os__complete(req, ST_E_PERMANENT,
                        "bucket directory %s does not exist (objectstore.file.root)", fo->root);
    else
        st_os__complete(req, errno_status(en), "bucket directory %s: %s", fo->root,
                        strerror(en));
    return 1;
}

static void fsync_dir_quietly(const char *dir) {
    st_err_t e = st_fsync_dir(dir);
    if (e) ST_WARN(ST_OS_SUBSYS, "fsync of directory %s failed: %s", dir, st_err_msg(e));
}

/* Creates the directories of kp; the parents of new ones are fsynced. */
static int make_dirs(file_os_t *fo, key_path_t *kp, int *err) {
    for (int i = 0; i < kp->ndirs; i++) {
        char save = kp->path[kp->dirs[i]];
        kp->path[kp->dirs[i]] = 0;
        int rc = mkdir(kp->path, 0755);
        int en = errno;
        if (rc == 0 && fo->fsync) {
            char *slash = strrchr(kp->path, '/');
            *slash = 0;
            fsync_dir_quietly(kp->path);
            *slash = '/';
        }
        kp->path[kp->dirs[i]] = save;
        if (rc != 0 && en != EEXIST) {
            *err = en;
            return -1;
        }
    }
    return 0;
}

/* Removes the now empty directories of kp, deepest first, best effort. */
static void prune_dirs(key_path_t *kp) {
    for (int i = kp->ndirs - 1; i >= 0; i--) {
        char save = kp->path[kp->dirs[i]];
        kp->path[kp->dirs[i]] = 0;
        int rc = rmdir(kp->path);
        kp->path[kp->dirs[i]] = save;
        if (rc != 0) break;
    }
}

static void hex8(uint32_t v, char out[9]) { snprintf(out, 9, "%08x", v); }

/* ------------------------------------------------------------------------
 * put
 * ---------------------------------------------------------------------- */

/* A conditional put's test, under the root's lock (exclusive flock on the
 * temporary directory, which every process sharing the root sees): NULL
 * when the object is as rq asks, else why not. */
static const char *put_condition_fails(st_os_req_t *req, const key_path_t *kp, int *en) {
    const st_os_request_t *rq = &req->rq;
    int fd = open(kp->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT && errno != ENOTDIR) {
            *en = errno;
            return "cannot read the object to test the condition";
        }
        return rq->if_match ? "there is no object to match" : NULL;
    }
    struct stat st;
    obj_hdr_t hd;
    char why[FILE_WHY_MAX], etag[9];
    int bad = fstat(fd, &st) != 0 || header_read(req, fd, &st, &hd, why, sizeof why) != ST_OK;
    close(fd);
    if (rq->if_none_match) return "the object exists";
    if (bad) return "the object is unreadable";
    hex8(hd.crc, etag);
    return strcmp(etag, rq->if_match) ? "the object's ETag differs" : NULL;
}

/* A put; with src_fd >= 0 (a copy: the source object, already open and
 * named by src.path) the source file is read through it, and closed. */
static void put_object(file_os_t *fo, st_os_req_t *req, int src_fd) {
    st_os_request_t *rq = &req->rq;
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    char why[FILE_WHY_MAX], tmp[FILE_PATH_MAX];
    int fd = -1, en = 0, have_tmp = 0, lock_fd = -1;
    uint8_t *chunk = NULL;
    st_err_t status = ST_E_PERMANENT;
    const char *what = "";
    /* a copy is a put whose source is another object's file */
    const char *op = rq->op == ST_OS_COPY ? "copy to" : "put";

    if (root_missing(req, fo)) goto out_fail;
    if (make_key_path(fo, rq->key, kp, why, sizeof why)) {
        st_os__complete(req, ST_E_PERMANENT, "%s %s: %s", op, rq->key, why);
        goto out_fail;
    }
    uint64_t size = rq->src.length, src_off = rq->src.offset;
    if (rq->src.kind == ST_OS_SRC_FILE) {
        struct stat sst;
        if (src_fd < 0) src_fd = open(rq->src.path, O_RDONLY | O_CLOEXEC);
        if (src_fd < 0 || fstat(src_fd, &sst) != 0) {
            en = errno;
            st_os__complete(req, errno_status(en), "%s %s: cannot open the source file %s: %s",
                            op, rq->key, rq->src.path, strerror(en));
            goto out_fail;
        }
        uint64_t fsize = (uint64_t)sst.st_size;
        if (src_off > fsize || (size != ST_OS_TO_END && size > fsize - src_off)) {
            st_os__complete(req, ST_E_PERMANENT,
                            "%s %s: source %s is %llu bytes, shorter than the range asked",
                            op, rq->key, rq->src.path, (unsigned long long)fsize);
            goto out_fail;
        }
        if (size == ST_OS_TO_END) size = fsize - src_off;
    }

    if (mkdir(fo->tmpdir, 0755) != 0 && errno != EEXIST) {
        en = errno;
        what = "cannot create the temporary directory";
        goto fail;
    }
    uint8_t rnd[8];
    st_random_bytes(rnd, sizeof rnd);
    snprintf(tmp, sizeof tmp, "%s/%02x%02x%02x%02x%02x%02x%02x%02x.tmp", fo->tmpdir, rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        en = errno;
        what = "cannot create a temporary file";
        goto fail;
    }
    have_tmp = 1;

    size_t hlen = header_size(rq);
    uint32_t crc = 0;
    if (rq->src.kind == ST_OS_SRC_MEM) {
        crc = rq->crc32c_known ? rq->crc32c : st_crc32c(0, rq->src.data, size);
        if (st_pwrite_all(fd, rq->src.data, size, (int64_t)hlen)) {
            en = errno;
            what = "write failed";
            goto fail;
        }
    } else {
        chunk = st_malloc(FILE_COPY_CHUNK);
        for (uint64_t done = 0; done < size;) {
            size_t n = (size_t)ST_MIN((uint64_t)FILE_COPY_CHUNK, size - done);
            size_t got = 0;
            if (st_pread_all(src_fd, chunk, n, (int64_t)(src_off + done), &got) || got != n) {
                en = got != n ? EIO : errno;
                what = "reading the source file failed (did it shrink?)";
                goto fail;
            }
            crc = st_crc32c(crc, chunk, n);
            if (st_pwrite_all(fd, chunk, n, (int64_t)(hlen + done))) {
                en = errno;
                what = "write failed";
                goto fail;
            }
            done += n;
        }
        if (rq->crc32c_known && rq->crc32c != crc) {
            st_os__complete(req, ST_E_PERMANENT,
                            "%s %s: the source's CRC32C is %08x, not %08x as %s", op,
                            rq->key, crc, rq->crc32c,
                            rq->op == ST_OS_COPY ? "its object's header says: the object is corrupt"
                                                 : "the caller said");
            goto out_fail;
        }
    }
    uint8_t hdr[FILE_HDR_MAX];
    header_encode(rq, size, crc, hdr, hlen);
    if (st_pwrite_all(fd, hdr, hlen, 0)) {
        en = errno;
        what = "write failed";
        goto fail;
    }
    if (fo->fsync && fsync(fd) != 0) {
        en = errno;
        what = "fsync failed";
        goto fail;
    }
    close(fd);
    fd = -1;

    if (rq->if_match || rq->if_none_match) {
        lock_fd = open(fo->tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) != 0) {
            en = errno;
            what = "cannot lock the root for a conditional put";
            goto fail;
        }
        const char *no = put_condition_fails(req, kp, &en);
        if (no && en) {
            what = no;
            goto fail;
        }
        if (no) {
            st_os__complete(req, ST_E_PRECONDITION_FAILED, "%s %s: precondition failed: %s",
                            op, rq->key, no);
            goto out_fail;
        }
    }
    /* A concurrent delete may remove a directory we just made: retry. */
    int tries = 0;
    for (;;) {
        if (make_dirs(fo, kp, &en)) {
            what = "cannot create the key's directory";
            goto fail;
        }
        if (rename(tmp, kp->path) == 0) {
            have_tmp = 0;
            break;
        }
        en = errno;
        if (en != ENOENT || ++tries >= 5) {
            what = "rename into place failed";
            goto fail;
        }
    }
    if (fo->fsync) {
        char *slash = strrchr(kp->path, '/');
        *slash = 0;
        fsync_dir_quietly(kp->path);
        *slash = '/';
    }
    if (lock_fd >= 0) close(lock_fd); /* after the rename: the next test sees it */
    if (src_fd >= 0) close(src_fd);
    free(chunk);
    if (rq->op != ST_OS_COPY) st_os__count_bytes(req, size, 0);
    req->res.crc32c = crc;
    req->res.has_crc32c = 1;
    req->res.object_size = size;
    req->res.has_object_size = 1;
    st_os__complete(req, ST_OK, NULL);
    return;

fail:
    status = errno_status(en);
    st_os__complete(req, status, "%s %s: %s: %s", op, rq->key, what, strerror(en));
out_fail:
    if (lock_fd >= 0) close(lock_fd);
    if (fd >= 0) close(fd);
    if (have_tmp) unlink(tmp);
    if (src_fd >= 0) close(src_fd);
    free(chunk);
}

static void do_put(file_os_t *fo, st_os_req_t *req) {
    put_object(fo, req, -1);
}

/* ------------------------------------------------------------------------
 * get and head
 * ---------------------------------------------------------------------- */

/* Opens the object of key and reads its header; completes req and returns
 * -1 when it cannot. */
static int open_object(file_os_t *fo, st_os_req_t *req, key_path_t *kp, int *fdp,
                       obj_hdr_t *hd, struct stat *st) {
    const char *key = req->rq.key;
    const char *op = st_os_op_name(req->rq.op);
    char why[FILE_WHY_MAX];
    if (root_missing(req, fo)) return -1;
    if (make_key_path(fo, key, kp, why, sizeof why)) {
        /* Such a key cannot have been stored here. */
        st_os__complete(req, ST_E_NOT_FOUND, "%s %s: no such key", op, key);
        return -1;
    }
    int fd = open(kp->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int en = errno;
        if (en == ENOENT || en == ENOTDIR || en == EISDIR)
            st_os__complete(req, ST_E_NOT_FOUND, "%s %s: no such key", op, key);
        else
            st_os__complete(req, errno_status(en), "%s %s: %s", op, key, strerror(en));
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        st_os__complete(req, ST_E_NOT_FOUND, "%s %s: no such key", op, key);
        close(fd);
        return -1;
    }
    st_err_t e = header_read(req, fd, st, hd, why, sizeof why);
    if (e) {
        st_os__complete(req, e == ST_E_CORRUPT ? ST_E_PERMANENT : errno_status(errno),
                        "%s %s: object file %s is unreadable: %s", op, key, kp->path, why);
        close(fd);
        return -1;
    }
    *fdp = fd;
    return 0;
}

static void fill_object_info(st_os_req_t *req, const obj_hdr_t *hd, const struct stat *st) {
    st_os_result_t *res = &req->res;
    char *etag = st_os__alloc(req, 9);
    hex8(hd->crc, etag);
    res->has_object_size = 1;
    res->object_size = hd->size;
    res->has_crc32c = 1;
    res->crc32c = hd->crc;
    res->etag = etag;
    res->mtime_ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    res->meta = hd->meta;
    res->nmeta = hd->nmeta;
}

static void do_head(file_os_t *fo, st_os_req_t *req) {
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    obj_hdr_t hd;
    struct stat st;
    int fd;
    if (open_object(fo, req, kp, &fd, &hd, &st)) return;
    close(fd);
    fill_object_info(req, &hd, &st);
    st_os__complete(req, ST_OK, NULL);
}

/* A copy: the source object's bytes, CRC32C (checked as they are read)
 * and metadata put under the new key as a put of a file, read through
 * the descriptor that read its header (a source replaced meanwhile is
 * not read half old, half new). */
static void do_copy(file_os_t *fo, st_os_req_t *req) {
    st_os_request_t *rq = &req->rq;
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    obj_hdr_t hd;
    struct stat st;
    int fd;
    const char *dst = rq->key;
    rq->key = rq->copy_source; /* open_object opens (and names) the source */
    int rc = open_object(fo, req, kp, &fd, &hd, &st);
    rq->key = dst;
    if (rc) return;
    rq->src = (st_os_src_t){.kind = ST_OS_SRC_FILE, .path = kp->path, .offset = hd.hlen,
                            .length = hd.size};
    rq->meta = hd.meta;
    rq->nmeta = hd.nmeta;
    rq->crc32c_known = 1;
    rq->crc32c = hd.crc;
    put_object(fo, req, fd);
}

static void do_get(file_os_t *fo, st_os_req_t *req) {
    st_os_request_t *rq = &req->rq;
    st_os_result_t *res = &req->res;
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    obj_hdr_t hd;
    struct stat st;
    int fd, out_fd = -1, en = 0;
    uint8_t *chunk = NULL;
    const char *what = "";

    if (open_object(fo, req, kp, &fd, &hd, &st)) return;
    fill_object_info(req, &hd, &st);
    if (rq->offset >= hd.size && !(rq->offset == 0 && hd.size == 0)) {
        st_os__complete(req, ST_E_PERMANENT,
                        "get %s: range starts at %llu, past the end of the %llu-byte object",
                        rq->key, (unsigned long long)rq->offset, (unsigned long long)hd.size);
        close(fd);
        return;
    }
    uint64_t n = hd.size - rq->offset;
    if (rq->length != ST_OS_TO_END && rq->length < n) n = rq->length;
    int whole = rq->offset == 0 && n == hd.size;
    uint32_t crc = 0;
    int64_t src = (int64_t)(hd.hlen + rq->offset);

    if (rq->sink.kind == ST_OS_SINK_FILE || rq->sink.kind == ST_OS_SINK_FD) {
        out_fd = rq->sink.kind == ST_OS_SINK_FD
                     ? fcntl(rq->sink.fd, F_DUPFD_CLOEXEC, 0)
                     : open(rq->sink.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (out_fd < 0) {
            en = errno;
            what = "cannot open the destination file";
            goto fail;
        }
        chunk = st_malloc(FILE_COPY_CHUNK);
        for (uint64_t done = 0; done < n;) {
            size_t c = (size_t)ST_MIN((uint64_t)FILE_COPY_CHUNK, n - done);
            size_t got = 0;
            if (st_pread_all(fd, chunk, c, src + (int64_t)done, &got) || got != c) {
                en = got != c ? EIO : errno;
                what = "read failed";
                goto fail;
            }
            if (whole) crc = st_crc32c(crc, chunk, c);
            if (st_pwrite_all(out_fd, chunk, c, (int64_t)(rq->sink.offset + done))) {
                en = errno;
                what = "writing the destination file failed";
                goto fail;
            }
            done += c;
        }
        res->data = NULL;
    } else {
        uint8_t *dst;
        if (rq->sink.kind == ST_OS_SINK_MEM) {
            dst = rq->sink.buf;
        } else {
            dst = malloc(n ? n : 1);
            if (!dst) {
                en = ENOMEM;
                what = "no memory for the object";
                goto fail;
            }
            res->data = dst;
        }
        size_t got = 0;
        if (st_pread_all(fd, dst, n, src, &got) || got != n) {
            en = got != n ? EIO : errno;
            what = "read failed";
            goto fail;
        }
        if (whole) crc = st_crc32c(0, dst, n);
        res->data = dst;
    }
    if (whole) {
        if (crc != hd.crc) {
            st_os__complete(req, ST_E_PERMANENT,
                            "get %s: object is corrupt: CRC32C of its bytes is %08x, "
                            "stored %08x",
                            rq->key, crc, hd.crc);
            goto out;
        }
        res->crc32c_verified = 1;
    }
    res->length = n;
    st_os__count_bytes(req, 0, n);
    st_os__complete(req, ST_OK, NULL);
    goto out;

fail:
    st_os__complete(req, errno_status(en), "get %s: %s: %s", rq->key, what, strerror(en));
out:
    if (out_fd >= 0) close(out_fd);
    close(fd);
    free(chunk);
}

/* ------------------------------------------------------------------------
 * delete
 * ---------------------------------------------------------------------- */

/* 0, or an errno. */
static int delete_key(file_os_t *fo, const char *key, key_path_t *kp) {
    char why[FILE_WHY_MAX];
    if (make_key_path(fo, key, kp, why, sizeof why)) return 0; /* cannot exist */
    if (unlink(kp->path) != 0) {
        int en = errno;
        if (en == ENOENT || en == ENOTDIR) return 0;
        return en;
    }
    prune_dirs(kp);
    return 0;
}

static void do_delete(file_os_t *fo, st_os_req_t *req) {
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    if (root_missing(req, fo)) return;
    int en = delete_key(fo, req->rq.key, kp);
    if (en)
        st_os__complete(req, errno_status(en), "delete %s: %s", req->rq.key, strerror(en));
    else
        st_os__complete(req, ST_OK, NULL);
}

static void do_delete_batch(file_os_t *fo, st_os_req_t *req) {
    st_os_request_t *rq = &req->rq;
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    if (root_missing(req, fo)) return;
    st_os_key_error_t *failed = NULL;
    size_t nfailed = 0;
    st_err_t worst = ST_OK;
    for (size_t i = 0; i < rq->nkeys; i++) {
        int en = delete_key(fo, rq->keys[i], kp);
        if (!en) continue;
        if (!failed) failed = st_os__alloc(req, rq->nkeys * sizeof *failed);
        failed[nfailed].key = rq->keys[i];
        failed[nfailed].status = errno_status(en);
        failed[nfailed].message = st_os__strdup(req, strerror(en));
        if (worst != ST_E_PERMANENT) worst = failed[nfailed].status;
        nfailed++;
    }
    req->res.failed = failed;
    req->res.nfailed = nfailed;
    if (nfailed)
        st_os__complete(req, worst, "delete-batch: %zu of %zu keys not deleted (first: %s: %s)",
                        nfailed, rq->nkeys, failed[0].key, failed[0].message);
    else
        st_os__complete(req, ST_OK, NULL);
}

/* ------------------------------------------------------------------------
 * list
 * ---------------------------------------------------------------------- */

typedef struct dent {
    char *key;  /* full key (a directory: its key prefix, with '/') */
    char *name; /* file name on disk */
    int is_dir;
} dent_t;

typedef struct lister {
    file_os_t *fo;
    st_os_req_t *req;
    const char *prefix;
    size_t plen;
    const char *after; /* "" on the first page */
    int max;
    st_os_entry_t *entries;
    int count;
    int truncated;
    int err; /* errno of a failed directory read */
    char err_path[FILE_PATH_MAX];
} lister_t;

static int dent_cmp(const void *a, const void *b) {
    return strcmp(((const dent_t *)a)->key, ((const dent_t *)b)->key);
}

/* Reads dir (whose keys start with keypfx), sorted by key. */
static int read_dir(const char *dir, const char *keypfx, dent_t **out, size_t *nout) {
    DIR *d = opendir(dir);
    if (!d) return errno;
    size_t n = 0, cap = 64;
    dent_t *v = st_malloc(cap * sizeof *v);
    size_t kplen = strlen(keypfx);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.') continue; /* ., .., our temporary directory */
        size_t nl = strlen(name);
        int is_dir = nl > 1 && name[nl - 1] == '@';
        char enc[NAME_MAX + 1], dec[NAME_MAX + 1];
        memcpy(enc, name, nl + 1);
        if (is_dir) enc[nl - 1] = 0;
        int dl = st_os__file_decode_component(enc, dec, sizeof dec);
        if (dl < 0) continue; /* not ours */
        if (n == cap) {
            cap *= 2;
            v = st_realloc(v, cap * sizeof *v);
        }
        v[n].key = st_malloc(kplen + (size_t)dl + 2);
        memcpy(v[n].key, keypfx, kplen);
        memcpy(v[n].key + kplen, dec, (size_t)dl);
        if (is_dir) v[n].key[kplen + (size_t)dl++] = '/';
        v[n].key[kplen + (size_t)dl] = 0;
        v[n].name = st_strdup(name);
        v[n].is_dir = is_dir;
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, dent_cmp);
    *out = v;
    *nout = n;
    return 0;
}

static void free_dents(dent_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].name);
    }
    free(v);
}

/* Depth-first walk in key order; stops once it found one entry more than a
 * page holds (that proves the listing is truncated). */
static void walk(lister_t *ls, const char *dir, const char *keypfx) {
    dent_t *v = NULL;
    size_t n = 0;
    int en = read_dir(dir, keypfx, &v, &n);
    if (en) {
        if (en != ENOENT && en != ENOTDIR && !ls->err) {
            ls->err = en;
            snprintf(ls->err_path, sizeof ls->err_path, "%s", dir);
        }
        return;
    }
    for (size_t i = 0; i < n && !ls->truncated && !ls->err; i++) {
        const char *key = v[i].key;
        size_t kl = strlen(key);
        /* Outside the prefix?  A directory may hold it or be inside it. */
        if (strncmp(key, ls->prefix, ST_MIN(kl, ls->plen)) != 0) continue;
        char path[FILE_PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, v[i].name) >= sizeof path) continue;
        if (v[i].is_dir) {
            /* Skip subtrees that lie wholly before the page start. */
            if (strcmp(key, ls->after) < 0 && strncmp(ls->after, key, kl) != 0) continue;
            walk(ls, path, key);
            continue;
        }
        if (kl < ls->plen || strcmp(key, ls->after) <= 0) continue;
        if (ls->count == ls->max) {
            ls->truncated = 1;
            break;
        }
        struct stat st;
        obj_hdr_t hd;
        char why[FILE_WHY_MAX];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue; /* deleted meanwhile */
        if (fstat(fd, &st) != 0 || header_read(NULL, fd, &st, &hd, why, sizeof why) != ST_OK) {
            ST_LOG_RATELIMITED(ST_LOG_WARN, ST_OS_SUBSYS, 10000,
                               "list: skipping unreadable object file %s", path);
            close(fd);
            continue;
        }
        close(fd);
        st_os_entry_t *e = &ls->entries[ls->count++];
        char *etag = st_os__alloc(ls->req, 9);
        hex8(hd.crc, etag);
        e->key = st_os__strdup(ls->req, key);
        e->size = hd.size;
        e->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        e->etag = etag;
    }
    free_dents(v, n);
}

static void do_list(file_os_t *fo, st_os_req_t *req) {
    st_os_request_t *rq = &req->rq;
    if (root_missing(req, fo)) return;
    lister_t *ls = st_os__alloc(req, sizeof *ls);
    ls->fo = fo;
    ls->req = req;
    ls->prefix = rq->prefix;
    ls->plen = strlen(rq->prefix);
    ls->after = rq->token ? rq->token : "";
    ls->max = rq->max_keys;
    ls->entries = st_os__alloc(req, (size_t)ls->max * sizeof *ls->entries);

    /* Start in the deepest directory the prefix names whole. */
    key_path_t *kp = st_os__alloc(req, sizeof *kp);
    const char *last_slash = strrchr(rq->prefix, '/');
    char why[FILE_WHY_MAX];
    if (last_slash) {
        size_t dl = (size_t)(last_slash - rq->prefix);
        char *dirkey = st_os__alloc(req, dl + 2);
        memcpy(dirkey, rq->prefix, dl);
        memcpy(dirkey + dl, "/x", 3); /* any last piece: we want its dirs */
        if (make_key_path(fo, dirkey, kp, why, sizeof why) == 0) {
            kp->path[kp->dirs[kp->ndirs - 1]] = 0;
            char *keypfx = st_os__alloc(req, dl + 2);
            memcpy(keypfx, rq->prefix, dl + 1);
            walk(ls, kp->path, keypfx);
        }
    } else {
        walk(ls, fo->root, "");
    }
    if (ls->err) {
        st_os__complete(req, errno_status(ls->err), "list %s: cannot read %s: %s", rq->prefix,
                        ls->err_path, strerror(ls->err));
        return;
    }
    req->res.entries = ls->entries;
    req->res.nentries = (size_t)ls->count;
    req->res.next_token =
        ls->truncated && ls->count ? ls->entries[ls->count - 1].key : NULL;
    st_os__complete(req, ST_OK, NULL);
}

/* ------------------------------------------------------------------------
 * check
 * ---------------------------------------------------------------------- */

static void do_check(file_os_t *fo, st_os_req_t *req) {
    if (root_missing(req, fo)) return;
    if (access(fo->root, W_OK | X_OK) != 0) {
        st_os__complete(req, ST_E_PERMANENT, "bucket directory %s is not writable: %s",
                        fo->root, strerror(errno));
        return;
    }
    if (mkdir(fo->tmpdir, 0755) != 0 && errno != EEXIST) {
        st_os__complete(req, errno_status(errno), "cannot create %s: %s", fo->tmpdir,
                        strerror(errno));
        return;
    }
    st_os__complete(req, ST_OK, NULL);
}

/* ------------------------------------------------------------------------
 * Backend
 * ---------------------------------------------------------------------- */

static void run_job(void *arg) {
    st_os_req_t *req = arg;
    file_os_t *fo = req->os->impl;
    if (req->early_status) {
        st_os__complete_early(req);
        return;
    }
    if (atomic_load(&fo->closing)) {
        req->res.cancelled = 1;
        st_os__complete(req, ST_E_RETRYABLE, "%s: cancelled, the object store is closing",
                        st_os_op_name(req->rq.op));
        return;
    }
    req->res.attempts = 1;
    atomic_fetch_add(&fo->os->n_attempts, 1);
    /* The requests S3 would bill for it: one of the operation's class,
     * a batch delete one POST per ST_OS_DELETE_BATCH_MAX keys. */
    static const st_os_class_t cls[ST_OS_NOPS] = {
        [ST_OS_PUT] = ST_OS_CLASS_WRITE,    [ST_OS_GET] = ST_OS_CLASS_READ,
        [ST_OS_HEAD] = ST_OS_CLASS_READ,    [ST_OS_LIST] = ST_OS_CLASS_WRITE,
        [ST_OS_DELETE] = ST_OS_CLASS_FREE,  [ST_OS_DELETE_BATCH] = ST_OS_CLASS_WRITE,
        [ST_OS_CHECK] = ST_OS_CLASS_WRITE,  [ST_OS_COPY] = ST_OS_CLASS_WRITE,
    };
    st_os__count_requests(req, cls[req->rq.op],
                          req->rq.op == ST_OS_DELETE_BATCH
                              ? (req->rq.nkeys + ST_OS_DELETE_BATCH_MAX - 1) / ST_OS_DELETE_BATCH_MAX
                              : 1);
    switch (req->rq.op) {
    case ST_OS_PUT: do_put(fo, req); break;
    case ST_OS_GET: do_get(fo, req); break;
    case ST_OS_HEAD: do_head(fo, req); break;
    case ST_OS_LIST: do_list(fo, req); break;
    case ST_OS_DELETE: do_delete(fo, req); break;
    case ST_OS_DELETE_BATCH: do_delete_batch(fo, req); break;
    case ST_OS_CHECK: do_check(fo, req); break;
    case ST_OS_COPY: do_copy(fo, req); break;
    }
}

static void file_submit(st_os_t *os, st_os_req_t *req) {
    file_os_t *fo = os->impl;
    st_pool_submit(fo->pool, run_job, req);
}

/* Temporary files of puts that a crash interrupted. */
static void remove_stale_tmp(file_os_t *fo) {
    DIR *d = opendir(fo->tmpdir);
    if (!d) return;
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[FILE_PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", fo->tmpdir, de->d_name) >= sizeof p) continue;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > FILE_TMP_STALE_S)
            unlink(p);
    }
    closedir(d);
}

static st_err_t file_open(st_os_t *os, char *err, size_t errlen) {
    const st_os_config_t *c = &os->cfg;
    size_t rl = strlen(c->file_root);
    while (rl > 1 && c->file_root[rl - 1] == '/') rl--;
    if (rl + 64 >= FILE_PATH_MAX) {
        st_snprintf_marked(err, errlen, "objectstore.file.root: path too long");
        return ST_E_CONFIG;
    }
    file_os_t *fo = st_calloc(1, sizeof *fo);
    fo->os = os;
    memcpy(fo->root, c->file_root, rl);
    fo->root[rl] = 0;
    snprintf(fo->tmpdir, sizeof fo->tmpdir, "%s/%s", fo->root, FILE_TMP_DIR);
    fo->fsync = c->file_fsync;
    if (c->file_create_root) {
        st_err_t e = st_mkdirs(fo->root);
        if (e) {
            st_snprintf_marked(err, errlen, "objectstore.file.root: cannot create %s: %s", fo->root,
                     st_err_msg(e));
            free(fo);
            return ST_E_CONFIG;
        }
    }
    remove_stale_tmp(fo);
    fo->pool = st_pool_new(c->file_threads, "os-file");
    st_snprintf_marked(os->describe, sizeof os->describe, "file://%s", fo->root);
    os->impl = fo;
    return ST_OK;
}

static void file_close(st_os_t *os) {
    file_os_t *fo = os->impl;
    atomic_store(&fo->closing, 1);
    st_pool_destroy(fo->pool); /* runs what is queued: those see closing */
    free(fo);
    os->impl = NULL;
}

const st_os_ops_t st_os_file_ops = {
    .name = "file",
    .open = file_open,
    .submit = file_submit,
    .close = file_close,
};
