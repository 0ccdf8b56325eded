/* files.h -- `minidoc files` (files.c): GridFS from the command line. */
#ifndef MD_TOOLS_FILES_H
#define MD_TOOLS_FILES_H

#include "minidoc.h"

/* argv: the words after "files".  Returns the exit status (0, 1, or 2 for
 * a usage error). */
int files_main(md_db *db, int argc, char **argv);

#endif
