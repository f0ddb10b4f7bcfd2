/* The mustache subset: each feature, each template error with FILE:LINE, strictness, and the
 * promise that no context value can change the shape or the types of the YAML document. */
#include "tests/unit/check.h"
#include "lib/render/mustache.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <stdlib.h>

static struct dlk_err err;

/* Renders src with the JSON context; returns the output or "ERROR <msg>" (caller frees). */
static char *render_with(const char *src, const char *ctx_json, const struct mustache_partials *p, size_t max)
{
	struct dlk_buf out = DLK_BUF_INIT;
	cJSON *ctx = cJSON_Parse(ctx_json);
	struct mustache *t;
	char *res;

	dlk_err_clear(&err);
	if (!ctx)
		return xstrdup("ERROR bad test context");
	t = mustache_parse("t.yaml", src, strlen(src), &err);
	if (!t || mustache_render(t, ctx, p, max, &out, &err) < 0)
		res = xasprintf("ERROR %s", err.msg);
	else
		res = dlk_buf_detach(&out, NULL);
	dlk_buf_release(&out);
	mustache_free(t);
	cJSON_Delete(ctx);
	return res;
}

static char *render(const char *src, const char *ctx_json)
{
	return render_with(src, ctx_json, NULL, 1 << 20);
}

#define CHECK_RENDER(src, ctx, want)                          \
	do {                                                  \
		char *got_ = render(src, ctx);                \
		CHECK_STR(got_, want);                        \
		free(got_);                                   \
	} while (0)

static void test_variables(void)
{
	const char *ctx = "{\"s\":\"hi\",\"n\":3,\"f\":0.5,\"t\":true,\"no\":false,\"z\":null,"
	                  "\"job\":{\"name\":\"mnist\",\"gpu\":{\"count\":8}},\"list\":[1,2],\"empty\":[],\"e\":\"\"}";
	CHECK_RENDER("name: {{s}}\n", ctx, "name: \"hi\"\n");
	CHECK_RENDER("{{ s }}|{{n}}|{{f}}|{{t}}|{{no}}|{{z}}", ctx, "\"hi\"|3|0.5|true|false|null");
	CHECK_RENDER("{{job.name}} {{job.gpu.count}}", ctx, "\"mnist\" 8");
	CHECK_RENDER("{{#list}}- {{.}}\n{{/list}}", ctx, "- 1\n- 2\n");
	CHECK_RENDER("a{{! a comment }}b", ctx, "ab");
	CHECK_RENDER("a{{! multi\nline\n}}b {{s}}", ctx, "ab \"hi\"");
	CHECK_RENDER("x: {{e}}", ctx, "x: \"\"");
	/* sections */
	CHECK_RENDER("{{#job}}{{name}}{{/job}}", ctx, "\"mnist\"");
	CHECK_RENDER("{{#t}}yes{{/t}}{{#no}}no{{/no}}{{#z}}z{{/z}}", ctx, "yes");
	CHECK_RENDER("{{#s}}[{{.}}]{{/s}}{{#e}}E{{/e}}", ctx, "[\"hi\"]");
	CHECK_RENDER("{{#n}}n={{.}}{{/n}}", "{\"n\":2}", "n=2");
	CHECK_RENDER("{{#n}}n{{/n}}", "{\"n\":0}", "");
	CHECK_RENDER("{{#empty}}x{{/empty}}", ctx, "");
	CHECK_RENDER("{{^empty}}none{{/empty}}{{^list}}x{{/list}}{{^z}}null{{/z}}{{^e}}empty{{/e}}{{^no}}F{{/no}}",
	             ctx, "nonenullemptyF");
	/* lookups climb the context stack; a nested name shadows an outer one */
	CHECK_RENDER("{{#items}}{{name}}/{{s}} {{/items}}", "{\"s\":\"out\",\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"s\":\"in\"}]}",
	             "\"a\"/\"out\" \"b\"/\"in\" ");
	CHECK_RENDER("{{#a}}{{#b}}{{c}}{{/b}}{{/a}}", "{\"a\":{\"c\":1,\"b\":true}}", "1");
}

static void test_standalone(void)
{
	const char *ctx = "{\"on\":true,\"off\":false,\"items\":[\"a\",\"b\"]}";
	CHECK_RENDER("a:\n{{#on}}\n  b: 1\n{{/on}}\nc: 2\n", ctx, "a:\n  b: 1\nc: 2\n");
	CHECK_RENDER("a:\n  {{#off}}\n  b: 1\n  {{/off}}\nc: 2\n", ctx, "a:\nc: 2\n");
	CHECK_RENDER("x:\n  {{! comment line }}\n  y: 1\n", ctx, "x:\n  y: 1\n");
	CHECK_RENDER("l:\n{{#items}}\n- {{.}}\n{{/items}}\n", ctx, "l:\n- \"a\"\n- \"b\"\n");
	/* a tag sharing its line with text is not standalone */
	CHECK_RENDER("a: {{#on}}1{{/on}}\n", ctx, "a: 1\n");
	CHECK_RENDER("  {{#on}} x\n{{/on}}", ctx, "   x\n");
	/* no trailing newline, CRLF */
	CHECK_RENDER("a\n{{#on}}", "{\"on\":[]}", "ERROR t.yaml:2: section '{{#on}}' is never closed");
	CHECK_RENDER("a\r\n{{#on}}\r\nb\r\n{{/on}}", ctx, "a\r\nb\r\n");
}

static void test_errors(void)
{
	const char *ctx = "{\"workers\":2,\"job\":{\"name\":\"x\"},\"list\":[1],\"obj\":{}}";
	CHECK_RENDER("a: 1\nb: {{wokers}}\n", ctx, "ERROR t.yaml:2: unknown name 'wokers' (did you mean 'workers'?)");
	CHECK_RENDER("{{job.nmae}}", ctx, "ERROR t.yaml:1: unknown name 'job.nmae' (did you mean 'name'?)");
	CHECK_RENDER("{{nothing}}", ctx, "ERROR t.yaml:1: unknown name 'nothing' (names here are: workers, job, list, obj)");
	CHECK_RENDER("\n\n{{#nope}}{{/nope}}", ctx, "ERROR t.yaml:3: unknown name 'nope' (names here are: workers, job, list, obj)");
	CHECK_RENDER("{{^nope}}{{/nope}}", ctx, "ERROR t.yaml:1: unknown name 'nope' (names here are: workers, job, list, obj)");
	CHECK_RENDER("{{workers.x}}", ctx, "ERROR t.yaml:1: 'workers.x' reaches into a value that is not an object");
	CHECK_RENDER("{{list}}", ctx, "ERROR t.yaml:1: 'list' is a list: use a section '{{#list}}...{{/list}}'");
	CHECK_RENDER("{{obj}}", ctx, "ERROR t.yaml:1: 'obj' is an object: use a section '{{#obj}}...{{/obj}}'");
	/* an unknown name inside a section that is never entered is still a template bug, but only
	 * found when rendered: strictness is about what is rendered */
	CHECK_RENDER("{{#list}}\n{{/list}}\n{{#job}}\n\n{{/jbo}}\n", ctx,
	             "ERROR t.yaml:5: '{{/jbo}}' does not match '{{#job}}' opened at line 3");
	CHECK_RENDER("a\n{{/x}}", ctx, "ERROR t.yaml:2: '{{/x}}' closes no open section");
	CHECK_RENDER("a\n\n{{#job}}\nb\n", ctx, "ERROR t.yaml:3: section '{{#job}}' is never closed");
	CHECK_RENDER("a\nb: {{name\nc", ctx, "ERROR t.yaml:2: unterminated tag '{{' (no '}}' on its line)");
	CHECK_RENDER("a {{!never closed", ctx, "ERROR t.yaml:1: unterminated tag '{{' (no '}}' on its line)");
	CHECK_RENDER("x\n{{}}", ctx, "ERROR t.yaml:2: empty tag '{{}}'");
	CHECK_RENDER("{{ # }}", ctx, "ERROR t.yaml:1: bad name '#' in tag");
	CHECK_RENDER("{{#  }}{{/}}", ctx, "ERROR t.yaml:1: empty tag '{{#  }}'");
	CHECK_RENDER("{{a b}}", ctx, "ERROR t.yaml:1: bad name 'a b' in tag");
	CHECK_RENDER("{{a..b}}", ctx, "ERROR t.yaml:1: bad name 'a..b' in tag");
	CHECK_RENDER("{{{workers}}}", ctx,
	             "ERROR t.yaml:1: unescaped output '{{{...' is not supported: every value is written as a quoted YAML scalar");
	CHECK_RENDER("{{&workers}}", ctx,
	             "ERROR t.yaml:1: unescaped output '{{&...' is not supported: every value is written as a quoted YAML scalar");
	CHECK_RENDER("{{=<% %>=}}", ctx, "ERROR t.yaml:1: changing delimiters ('{{=') is not supported");
	CHECK_RENDER("{{> part}}", ctx, "ERROR t.yaml:1: partial '{{> part}}' cannot be used here");

	struct dlk_buf deep = DLK_BUF_INIT;
	for (int i = 0; i < 40; i++)
		dlk_buf_addf(&deep, "{{#job}}\n");
	char *got = render(deep.data, ctx);
	CHECK_STR(got, "ERROR t.yaml:33: sections nested deeper than 32");
	free(got);
	dlk_buf_release(&deep);

	/* output is bounded: a list of 1000 items over a 1000-byte body is 1 MB */
	struct dlk_buf big = DLK_BUF_INIT;
	dlk_buf_adds(&big, "{\"l\":[");
	for (int i = 0; i < 1000; i++)
		dlk_buf_adds(&big, i ? ",1" : "1");
	dlk_buf_adds(&big, "]}");
	got = render_with("{{#l}}0123456789{{/l}}", big.data, NULL, 5000);
	CHECK_STR(got, "ERROR t.yaml:1: rendered output is larger than the limit of 5000 bytes");
	free(got);
	dlk_buf_release(&big);

	struct mustache *t = mustache_parse("nul.yaml", "a\n\0b", 4, &err);
	CHECK(t == NULL);
	CHECK_STR(err.msg, "nul.yaml:2: the template holds a NUL byte");
	CHECK(err.code == DLK_EXIT_CONFIG);
}

static char *check(const char *src, const char *ctx_json)
{
	cJSON *ctx = cJSON_Parse(ctx_json);
	struct mustache *t = mustache_parse("c.yaml", src, strlen(src), &err);
	char *res;

	if (!t)
		res = xasprintf("ERROR %s", err.msg);
	else if (mustache_check(t, ctx, NULL, &err) < 0)
		res = xasprintf("ERROR %s", err.msg);
	else
		res = xstrdup("ok");
	mustache_free(t);
	cJSON_Delete(ctx);
	return res;
}

#define CHECK_CHECK(src, ctx, want)                           \
	do {                                                  \
		char *got_ = check(src, ctx);                 \
		CHECK_STR(got_, want);                        \
		free(got_);                                   \
	} while (0)

/* mustache_check: names in branches this context does not take are checked too */
static void test_check_all_branches(void)
{
	const char *ctx = "{\"gpu\":false,\"product\":null,\"items\":[],\"tols\":[{\"key\":\"k\"}],\"name\":\"x\",\"o\":{\"a\":1}}";
	/* rendering does not see the typo: the section is not entered */
	CHECK_RENDER("{{#gpu}}\nx: {{prodcut}}\n{{/gpu}}\n", ctx, "");
	CHECK_CHECK("{{#gpu}}\nx: {{prodcut}}\n{{/gpu}}\n", ctx, "ERROR c.yaml:2: unknown name 'prodcut' (did you mean 'product'?)");
	CHECK_CHECK("{{^name}}\n{{nmae}}\n{{/name}}", ctx, "ERROR c.yaml:2: unknown name 'nmae' (did you mean 'name'?)");
	CHECK_CHECK("{{#product}}{{o.b}}{{/product}}", ctx, "ERROR c.yaml:1: unknown name 'o.b' (did you mean 'a'?)");
	/* a list's first item stands for all of them */
	CHECK_CHECK("{{#tols}}{{key}}{{kye}}{{/tols}}", ctx, "ERROR c.yaml:1: unknown name 'kye' (did you mean 'key'?)");
	/* the fields of an empty list's items are unknown: not checked; other names still are */
	CHECK_CHECK("{{#items}}{{whatever}} {{name}}{{/items}}", ctx, "ok");
	CHECK_CHECK("{{#items}}{{#sub}}{{x}}{{/sub}}{{/items}}", ctx, "ok");
	CHECK_CHECK("{{#gpu}}{{o}}{{/gpu}}", ctx, "ERROR c.yaml:1: 'o' is an object: use a section '{{#o}}...{{/o}}'");
	CHECK_CHECK("{{#o}}{{a}}{{/o}}{{^gpu}}{{name}}{{/gpu}}", ctx, "ok");
}

/* partials: a tiny table of templates */
static struct mustache *parts[3];

static const struct mustache *find_part(void *ud, const char *name, struct dlk_err *e)
{
	(void)ud;
	for (int i = 0; i < 3; i++)
		if (parts[i] && !strcmp(mustache_file(parts[i]), name))
			return parts[i];
	dlk_errf(e, DLK_EXIT_CONFIG, "unknown partial '%s'", name);
	return NULL;
}

static void test_partials(void)
{
	const char *body = "name: {{name}}\nports:\n- {{port}}\n";
	const char *self = "again:\n  {{> _self.yaml}}\n";
	struct mustache_partials p = { find_part, NULL };

	parts[0] = mustache_parse("_body.yaml", body, strlen(body), &err);
	parts[1] = mustache_parse("_self.yaml", self, strlen(self), &err);
	parts[2] = mustache_parse("_bad.yaml", "x: {{nope}}\n", 12, &err);

	char *got = render_with("spec:\n  inner:\n    {{> _body.yaml}}\nend: 1\n", "{\"name\":\"a\",\"port\":80}", &p, 1 << 20);
	CHECK_STR(got, "spec:\n  inner:\n    name: \"a\"\n    ports:\n    - 80\nend: 1\n");
	free(got);
	got = render_with("x: [{{> _body.yaml}}]", "{\"name\":\"a\",\"port\":80}", &p, 1 << 20);
	CHECK_STR(got, "x: [name: \"a\"\nports:\n- 80\n]");
	free(got);
	got = render_with("{{> _self.yaml}}", "{}", &p, 1 << 20);
	CHECK_STR(got, "ERROR _self.yaml:2: partial '_self.yaml' nested too deep (does a partial include itself?)");
	free(got);
	got = render_with("a\n{{> _nope.yaml}}\n", "{}", &p, 1 << 20);
	CHECK_STR(got, "ERROR t.yaml:2: unknown partial '_nope.yaml'");
	free(got);
	got = render_with("a\n  {{> _bad.yaml}}\n", "{}", &p, 1 << 20);
	CHECK_STR(got, "ERROR _bad.yaml:1: unknown name 'nope'");
	free(got);
	for (int i = 0; i < 3; i++)
		mustache_free(parts[i]);

	/* 200 partials that each include the next 200 times, 4 levels: 200^4 visits, bounded instead of a hang */
	struct dlk_buf wide = DLK_BUF_INIT, wider = DLK_BUF_INIT;
	for (int i = 0; i < 200; i++) {
		dlk_buf_adds(&wide, "{{> _b.yaml}}");
		dlk_buf_adds(&wider, "{{> _c.yaml}}");
	}
	parts[0] = mustache_parse("_a.yaml", wide.data, wide.len, &err);
	parts[1] = mustache_parse("_b.yaml", wider.data, wider.len, &err);
	parts[2] = mustache_parse("_c.yaml", "{{#f}}{{/f}}", 12, &err);
	struct dlk_buf root = DLK_BUF_INIT;
	for (int i = 0; i < 200; i++)
		dlk_buf_adds(&root, "{{> _a.yaml}}");
	got = render_with(root.data, "{\"f\":false}", &p, 1 << 20);
	dlk_buf_release(&root);
	CHECK_STR(got, "ERROR _c.yaml:1: the template expands to too much work (partials including partials?)");
	free(got);
	for (int i = 0; i < 3; i++)
		mustache_free(parts[i]);
	dlk_buf_release(&wider);
	dlk_buf_release(&wide);
}

/* Whatever the value, the rendered document has the same shape and gives back the same bytes. */
static void test_hostile_values(void)
{
	static const char *const hostile[] = {
		"plain", "a\nb: injected", "x\n- item", "}}{{name}}", "{{name}}", "*alias", "&anchor x",
		"!!int 5", "yes", "no", "on", "0x10", "1e3", "null", "~", "", " ", "- x", "a: b", "#comment",
		"'", "\"", "\\", "\\\"", "\"\n\"", "\t", "\r\n", "---", "...", "---\nkind: Secret", "| block",
		"> folded", "[1, 2]", "{a: 1}", "@", "`", "%TAG", "\xe2\x80\xa8\xe2\x80\xa9\xc2\x85",
		"\xef\xbb\xbf", "\x1b[31mred", "caf\xc3\xa9 \xf0\x9f\x98\x80", "a #b", "key:", "? k",
		"\"quoted\": \"x\"\nmore: 1", "{{", "}}", "{{#v}}", "<<", "=", "2001-12-14", "-.inf", ".nan",
	};
	const char *tmpl = "name: {{v}}\nlist:\n- {{v}}\n- fixed\nmap:\n  k: {{v}}\n  {{#flag}}\n  flagged: {{v}}\n  {{/flag}}\nend: 1\n";
	struct mustache *t = mustache_parse("h.yaml", tmpl, strlen(tmpl), &err);
	int all = t != NULL;

	for (size_t i = 0; t && i < DLK_ARRAY_SIZE(hostile); i++) {
		const char *s = hostile[i];
		cJSON *ctx = cJSON_CreateObject();
		struct dlk_buf out = DLK_BUF_INIT;
		cJSON_AddStringToObject(ctx, "v", s);
		cJSON_AddTrueToObject(ctx, "flag");
		int ok = mustache_render(t, ctx, NULL, 1 << 20, &out, &err) == 0;
		cJSON *docs = ok ? yamljson_parse(out.data, out.len, "out", NULL, &err) : NULL;
		cJSON *want = cJSON_CreateObject();
		cJSON_AddStringToObject(want, "name", s);
		cJSON *l = cJSON_AddArrayToObject(want, "list");
		cJSON_AddItemToArray(l, cJSON_CreateString(s));
		cJSON_AddItemToArray(l, cJSON_CreateString("fixed"));
		cJSON *m = cJSON_AddObjectToObject(want, "map");
		cJSON_AddStringToObject(m, "k", s);
		cJSON_AddStringToObject(m, "flagged", s);
		cJSON_AddNumberToObject(want, "end", 1);
		ok = ok && docs && cJSON_GetArraySize(docs) == 1 && cJSON_Compare(want, cJSON_GetArrayItem(docs, 0), 1);
		if (!ok) {
			printf("#   hostile value %zu changed the document:\n%s\n# %s\n", i, out.data, err.msg);
			all = 0;
		}
		cJSON_Delete(want);
		cJSON_Delete(docs);
		cJSON_Delete(ctx);
		dlk_buf_release(&out);
	}
	CHECK_MSG(all, "%zu hostile values render to the same shape and come back byte-identical",
	          DLK_ARRAY_SIZE(hostile));
	mustache_free(t);

	/* numbers and booleans keep their types too */
	char *got = render("a: {{n}}\nb: {{b}}\nc: {{big}}\n", "{\"n\":-1.5e-7,\"b\":false,\"big\":123456789012}");
	cJSON *docs = yamljson_parse(got, strlen(got), "o", NULL, &err);
	char *j = docs ? cJSON_PrintUnformatted(cJSON_GetArrayItem(docs, 0)) : NULL;
	CHECK_STR(j, "{\"a\":-1.5e-07,\"b\":false,\"c\":123456789012}");
	free(j);
	free(got);
	cJSON_Delete(docs);

	/* invalid UTF-8 in a value is an error, not a broken document */
	got = render("a: {{v}}", "{\"v\":\"\\u00e9\"}");
	CHECK_STR(got, "a: \"\xc3\xa9\"");
	free(got);
	cJSON *ctx = cJSON_CreateObject();
	cJSON_AddStringToObject(ctx, "v", "\xff\xfe");
	struct dlk_buf out = DLK_BUF_INIT;
	t = mustache_parse("u.yaml", "\na: {{v}}", 9, &err);
	CHECK(mustache_render(t, ctx, NULL, 1 << 20, &out, &err) == -1);
	CHECK_STR(err.msg, "u.yaml:2: the value of 'v' is not valid UTF-8");
	mustache_free(t);
	cJSON_Delete(ctx);
	dlk_buf_release(&out);
}

int main(void)
{
	test_variables();
	test_standalone();
	test_errors();
	test_check_all_branches();
	test_partials();
	test_hostile_values();
	return CHECK_DONE();
}
