/* A self-contained supervisor for a stock framework image (docs/program-cluster.md): the init
 * container of a program's pod, run from dlk's own image, copies the running dlk, every shared
 * object it has loaded (glibc and its dynamic loader included) and a starter script into a
 * volume; the program's container, whatever its image holds, then runs
 *     DIR/dlk train --worker ...
 * which is  DIR/lib/LOADER --library-path DIR/lib DIR/bin/dlk train --worker ...  (the GPU
 * kit's way, kit/run): dlk meets only its own libraries, and the program it starts (exec'd
 * without LD_LIBRARY_PATH) only the image's. Needs in the image: a POSIX sh and an x86-64 (or
 * the architecture dlk was built for) Linux. */
#ifndef DLK_PROGRAM_PLACE_H
#define DLK_PROGRAM_PLACE_H

#include "lib/util/err.h"

/* Copies this process's program to DIR/bin/dlk, its loaded shared objects and its program
 * interpreter to DIR/lib/ and writes DIR/dlk (0755) which starts it. *n_libs counts the shared
 * objects (may be NULL). -1 with err naming what could not be read or written. */
int dlk_program_place(const char *dir, int *n_libs, struct dlk_err *err);

#endif
