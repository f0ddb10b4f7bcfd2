/* Frame types and magics of the rendezvous and control plane. Internal to lib/comm. */
#ifndef DLK_COMM_WIRE_H
#define DLK_COMM_WIRE_H

#define DIST_MAGIC_HELLO 0x524b4c44u /* "DLKR" */
#define DIST_MAGIC_RING 0x474b4c44u  /* "DLKG" */
#define DIST_MAGIC_COLL 0x434b4c44u  /* "DLKC": header of every collective on the ring */

enum dist_frame {
	DIST_FRAME_HELLO = 1,   /* rank > 0 -> rank 0 */
	DIST_FRAME_WELCOME = 2, /* rank 0 -> rank > 0: address table + blob */
	DIST_FRAME_REJECT = 3,  /* rank 0 -> rank > 0: code, retry flag, message */
	DIST_FRAME_RING = 4,    /* rank r -> rank r+1 on the data port */
	DIST_FRAME_FAIL = 5,    /* control plane, rank > 0 -> rank 0: why this rank failed */
	DIST_FRAME_ABORT = 6,   /* control plane, rank 0 -> everyone: why the gang failed */
	DIST_FRAME_BYE = 7      /* control plane, both ways: this rank is done, not dead */
};

#endif
