#ifndef DLK_COMMANDS_H
#define DLK_COMMANDS_H
int dlk_main(int argc, char **argv);
#endif
