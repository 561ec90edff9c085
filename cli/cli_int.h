/*
 * cli_int.h - what the files of the `strata` command-line tool share.
 *
 * Each subcommand is one function taking the configuration the tool
 * loaded (--config, --override) and the words after its name.  They return
 * the process's exit status: 0 on success, 1 on a failure (after one line
 * on stderr), 2 on a usage error.
 */
#ifndef CLI_INT_H
#define CLI_INT_H

#include "st_objectstore.h"

#define ST_CLI_EXIT_OK 0
#define ST_CLI_EXIT_FAIL 1
#define ST_CLI_EXIT_USAGE 2

/* strata bucket ... <verb> [args]: argv[0] is the verb.
 *   ls [PREFIX] | stat KEY | get KEY LOCALFILE | put KEY LOCALFILE | rm KEY */
int st_cli_bucket(const st_os_config_t *cfg, int argc, char **argv);
void st_cli_bucket_usage(FILE *out);

#endif /* CLI_INT_H */
