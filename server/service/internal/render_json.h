/*
 * render_json.h - the service's side of render.c: the same answers as
 * jansson objects, for the files of server/service/ that assemble whole
 * responses (api.c).  Not a public header: only the service has this folder
 * on its include path; other rooms use render.h's JSON text.
 *
 * Ownership: every json_t * returned is a new reference the caller
 * json_decref's (or hands to json_object_set_new / json_array_append_new).
 */
#ifndef PDBSYM_RENDER_JSON_H
#define PDBSYM_RENDER_JSON_H

#include <stdint.h>

#include <jansson.h>

#include "render.h"

/* render_frame_json's object. */
json_t *render_frame_obj(const render_module *rm, const render_frame *f);

/* render_answer_json's object. */
json_t *render_answer_obj(const render_module *rm, const st_answer *a, int module,
                          bool is_managed, uint32_t rva_or_token, uint32_t il_offset);

/* A JSON string from bytes that may not be valid UTF-8 (names and paths from
 * untrusted files): invalid sequences become U+FFFD; NULL gives "". */
json_t *render_string(const char *s);

/* "0x1a2b"; width > 0 pads with zeros to that many digits ("0x06000001"). */
json_t *render_hex(uint64_t v, int width);

#endif
