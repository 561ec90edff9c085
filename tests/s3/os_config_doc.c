/*
 * os_config_doc.c - prints the objectstore.* settings as the Markdown table
 * that objectstore/README.md carries; the objectstore.config.doc test fails
 * when the two differ.
 */
#include "st_objectstore.h"

int main(void) {
    st_cfg_doc_markdown(&st_os_config_table, stdout);
    return 0;
}
