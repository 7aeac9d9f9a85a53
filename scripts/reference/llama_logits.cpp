// llama-logits: llama.cpp's next-token logits along a greedy or given token path, for
// scripts/reference/engine_vs_llamacpp.py (the `logits` part of scripts/bench-engine.sh).
// Built by scripts/build-llamacpp.sh against the same static libraries as llama-simple, and run
// the way llama-simple runs a prompt: tokenized with special tokens, one decode call for the
// whole prompt, then one token a call, 2 threads.
//
//   llama-logits MODEL.gguf PROMPT_FILE STEPS [PATH] [LOGITS_OUT]
//
// PATH: comma-separated token ids to feed after the prompt ("-" or absent: feed our own argmax,
// i.e. greedy). LOGITS_OUT: where the prompt's last-position logits go, raw little-endian f32.
// Prints one JSON object: {"n_prompt": N, "steps": [[argmax, its logit, runner-up, its logit], ...]}.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static int fail(const std::string & message) {
    fprintf(stderr, "llama-logits: %s\n", message.c_str());
    return 1;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        return fail("usage: llama-logits MODEL.gguf PROMPT_FILE STEPS [PATH] [LOGITS_OUT]");
    }
    std::ifstream prompt_file(argv[2], std::ios::binary);
    if (!prompt_file) {
        return fail(std::string("cannot read the prompt file ") + argv[2]);
    }
    std::stringstream text;
    text << prompt_file.rdbuf();
    const std::string prompt = text.str();
    const int steps = atoi(argv[3]);
    if (steps < 1) {
        return fail("STEPS must be at least 1");
    }
    std::vector<llama_token> path;
    if (argc > 4 && std::string(argv[4]) != "-") {
        std::stringstream ids(argv[4]);
        std::string id;
        while (std::getline(ids, id, ',')) {
            path.push_back((llama_token) atoi(id.c_str()));
        }
    }
    const char * logits_out = argc > 5 ? argv[5] : nullptr;

    ggml_backend_load_all();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == nullptr) {
        return fail(std::string("cannot load the model ") + argv[1]);
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_prompt = -llama_tokenize(vocab, prompt.c_str(), prompt.size(), nullptr, 0, true, true);
    std::vector<llama_token> tokens(n_prompt);
    if (llama_tokenize(vocab, prompt.c_str(), prompt.size(), tokens.data(), tokens.size(), true, true) < 0) {
        return fail("cannot tokenize the prompt");
    }

    llama_context_params params = llama_context_default_params();
    params.n_ctx = n_prompt + steps;
    params.n_batch = n_prompt;
    params.n_threads = 2;
    params.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(model, params);
    if (ctx == nullptr) {
        return fail("cannot create the context");
    }
    const int n_vocab = llama_vocab_n_tokens(vocab);

    llama_batch batch = llama_batch_get_one(tokens.data(), tokens.size());
    llama_token next = 0;
    printf("{\"n_prompt\": %d, \"steps\": [", n_prompt);
    for (int step = 0; step < steps; step++) {
        if (llama_decode(ctx, batch) != 0) {
            return fail("llama_decode failed at step " + std::to_string(step));
        }
        const float * logits = llama_get_logits_ith(ctx, -1);
        if (step == 0 && logits_out != nullptr) {
            FILE * out = fopen(logits_out, "wb");
            if (out == nullptr || fwrite(logits, sizeof(float), n_vocab, out) != (size_t) n_vocab || fclose(out) != 0) {
                return fail(std::string("cannot write ") + logits_out);
            }
        }
        int best = 0;
        for (int i = 1; i < n_vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        int second = best == 0 ? 1 : 0;
        for (int i = 0; i < n_vocab; i++) {
            if (i != best && logits[i] > logits[second]) {
                second = i;
            }
        }
        printf("%s[%d, %.6f, %d, %.6f]", step > 0 ? ", " : "", best, logits[best], second, logits[second]);
        if (!path.empty()) {
            if ((size_t) step >= path.size()) {
                break;
            }
            next = path[step];
        } else {
            next = best;
            if (llama_vocab_is_eog(vocab, next)) {
                break;
            }
        }
        batch = llama_batch_get_one(&next, 1);
    }
    printf("]}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
