/* err.c - lookups over the one error table (ST_ERR_MAP in st_base.h). */
#include "st_base.h"

#include <errno.h>

typedef struct err_row {
    st_err_t code;
    const char *name;
    const char *msg;
    int retriable;
    int16_t wire;
} err_row_t;

static const err_row_t err_rows[] = {
#define ST_ERR_ROW(name, val, retriable, wire, msg) {ST_E_##name, #name, msg, retriable, wire},
    ST_ERR_MAP(ST_ERR_ROW)
#undef ST_ERR_ROW
};

static const err_row_t *err_find(st_err_t e) {
    for (size_t i = 0; i < ST_ARRAY_SIZE(err_rows); i++)
        if (err_rows[i].code == e) return &err_rows[i];
    return NULL;
}

const char *st_err_name(st_err_t e) {
    const err_row_t *r = err_find(e);
    return r ? r->name : "UNKNOWN_ERROR";
}

const char *st_err_msg(st_err_t e) {
    const err_row_t *r = err_find(e);
    return r ? r->msg : "unknown error";
}

int st_err_retriable(st_err_t e) {
    const err_row_t *r = err_find(e);
    return r ? r->retriable : 0;
}

int16_t st_err_wire(st_err_t e) {
    const err_row_t *r = err_find(e);
    return r ? r->wire : -1;
}

st_err_t st_err_from_wire(int16_t code) {
    if (code == 0) return ST_OK;
    /* Kafka's codes are their own value in the table */
    for (size_t i = 0; i < ST_ARRAY_SIZE(err_rows); i++)
        if ((int)err_rows[i].code == code && (int)err_rows[i].code < 1000) return err_rows[i].code;
    return ST_E_UNKNOWN_SERVER_ERROR;
}

st_err_t st_err_from_errno(int errnum) {
    switch (errnum) {
    case 0: return ST_OK;
    case ENOMEM: return ST_E_NOMEM;
    case ENOSPC:
    case EDQUOT: return ST_E_NOSPACE;
    case ENOENT: return ST_E_NOT_FOUND;
    case EEXIST: return ST_E_EXISTS;
    case EAGAIN: return ST_E_AGAIN;
    case EINVAL: return ST_E_INVAL;
    case ETIMEDOUT: return ST_E_TIMEOUT;
    case EMFILE:
    case ENFILE: return ST_E_NOFILE;
    case EACCES:
    case EPERM: return ST_E_PERM;
    case EROFS: return ST_E_READ_ONLY_FS;
    default: return ST_E_IO;
    }
}
