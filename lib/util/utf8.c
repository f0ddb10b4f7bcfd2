#include "lib/util/utf8.h"

#include <string.h>

#include "lib/util/buf.h"

size_t dlk_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

int dlk_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp;

	for (size_t i = 0, k; i < len; i += k) {
		k = dlk_utf8_decode(u + i, len - i, &cp);
		if (!k || !cp)
			return 0;
	}
	return 1;
}

size_t dlk_utf8_cut(const char *s, size_t len, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		uint32_t cp;
		size_t n = dlk_utf8_decode(u + i, len - i, &cp);
		if (!n)
			n = 1; /* a stray byte is one unit: it cannot be cut */
		if (i + n > max)
			break;
		i += n;
	}
	return i;
}

void dlk_utf8_drop_cut(char *s)
{
	size_t len = strlen(s), i = len, want;
	unsigned char lead;

	/* back to the last lead byte within 3 bytes of the end */
	while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (!i)
		return;
	lead = (unsigned char)s[i - 1];
	want = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
	if (want > len - i + 1)
		s[i - 1] = '\0';
}

/* Code points a terminal acts on instead of showing: C0, DEL, C1 (0x9b is CSI on some
 * terminals), the line and paragraph separators and the bidirectional controls that
 * reorder what follows ("Trojan Source", CVE-2021-42574). */
static int acts_on_terminal(uint32_t c)
{
	return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0x2028 || c == 0x2029 ||
	       (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f ||
	       c == 0x061c;
}

void dlk_buf_add_visible(struct dlk_buf *b, const char *s, size_t len, int keep_newlines)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		uint32_t c;
		size_t n = dlk_utf8_decode(u + i, len - i, &c);
		if (!n) {
			dlk_buf_addf(b, "\\x%02x", u[i]);
			i++;
			continue;
		}
		if (!acts_on_terminal(c) || (keep_newlines && (c == '\n' || c == '\t')))
			dlk_buf_add(b, s + i, n);
		else if (c == 0x1b)
			dlk_buf_adds(b, "\\e");
		else if (c == '\n')
			dlk_buf_adds(b, "\\n");
		else if (c == '\r')
			dlk_buf_adds(b, "\\r");
		else if (c == '\t')
			dlk_buf_adds(b, "\\t");
		else if (c < 0x80)
			dlk_buf_addf(b, "\\x%02x", (unsigned)c);
		else
			dlk_buf_addf(b, "\\u%04x", (unsigned)c);
		i += n;
	}
}

const char *dlk_visible(const char *s)
{
	static _Thread_local struct dlk_buf ring[8];
	static _Thread_local unsigned next;
	struct dlk_buf *b = &ring[next++ % 8];

	if (!b->data)
		*b = (struct dlk_buf)DLK_BUF_INIT;
	dlk_buf_reset(b);
	if (s)
		dlk_buf_add_visible(b, s, strlen(s), 0);
	return b->data;
}
