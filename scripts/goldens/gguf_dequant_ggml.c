// ggml's own dequantisation of one tensor's bytes, the reference make_gguf_fixtures.py checks
// gguf-py against:  gguf_dequant_ggml TYPE_ID N_VALUES IN.bin OUT.f32
// Built by make-gguf-fixtures.sh against llama.cpp's libggml-base (its to_float is ggml-quants.c's
// dequantize_row_*, compiled without -march, so no FMA contraction).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s TYPE_ID N_VALUES IN.bin OUT.f32\n", argv[0]);
    return 2;
  }
  const enum ggml_type type = (enum ggml_type)atoi(argv[1]);
  const long long n = atoll(argv[2]);
  const size_t in_bytes = ggml_row_size(type, n);
  unsigned char* in = malloc(in_bytes);
  float* out = malloc((size_t)n * sizeof(float));
  FILE* f = fopen(argv[3], "rb");
  if (!in || !out || !f || fread(in, 1, in_bytes, f) != in_bytes) {
    fprintf(stderr, "gguf_dequant_ggml: cannot read %zu bytes from %s\n", in_bytes, argv[3]);
    return 1;
  }
  fclose(f);
  if (type == GGML_TYPE_F32) {
    memcpy(out, in, in_bytes);
  } else {
    const struct ggml_type_traits* traits = ggml_get_type_traits(type);
    if (!traits->to_float) {
      fprintf(stderr, "gguf_dequant_ggml: ggml has no to_float for type %d\n", (int)type);
      return 1;
    }
    traits->to_float(in, out, n);
  }
  f = fopen(argv[4], "wb");
  if (!f || fwrite(out, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0) {
    fprintf(stderr, "gguf_dequant_ggml: cannot write %s\n", argv[4]);
    return 1;
  }
  free(in);
  free(out);
  return 0;
}
