// Engine::serve: the decode loop fed by a RequestSource (the HTTP server's queue), each request
// validated on arrival (a bad one is answered through its on_error, the others go on), its
// committed text and tokens sent after every step, cancelled requests dropped between steps.
#include <map>
#include <string>
#include <vector>

#include "engine/engine_impl.h"

namespace jet {

void Engine::serve(const RequestSource& source, int max_active) {
  impl_->model->use_on_this_thread();
  // The requests in flight, by the id their Sequence carries as its index (map nodes stay put).
  struct Live {
    Sequence seq;
    ServeRequest request;
    size_t streamed = 0;  // bytes of the completion text sent
    // The completion text since the last call; a preempted sequence restarts with the same
    // seed and so recommits the same tokens, which are not sent twice.
    std::string new_text() {
      const std::string_view text = seq.text.streamable();
      if (text.size() <= streamed) return {};
      std::string out(text.substr(streamed));
      streamed = text.size();
      return out;
    }
    size_t tokens_sent = 0;  // completion tokens handed to on_tokens
    // The committed tokens since the last call (a restarted sequence's recommits excluded).
    std::vector<CommittedToken> new_tokens() {
      std::vector<CommittedToken> out;
      for (; tokens_sent < seq.completion.size(); ++tokens_sent) {
        out.push_back({seq.completion[tokens_sent], seq.trajectory[tokens_sent], seq.logprobs[tokens_sent]});
      }
      return out;
    }
    // What this step committed, to the request's callbacks.
    void send_progress() {
      if (request.on_text) {
        const std::string text = new_text();
        if (!text.empty()) request.on_text(text);
      }
      if (request.on_tokens) {
        const std::vector<CommittedToken> tokens = new_tokens();
        if (!tokens.empty()) request.on_tokens(tokens);
      }
    }
  };
  std::map<size_t, Live> live;
  size_t next_id = 0;
  Impl& impl = *impl_;
  impl.loop(
      max_active > 0 ? static_cast<size_t>(max_active) : static_cast<size_t>(impl.options.max_num_seqs),
      [&](size_t room, bool idle, std::vector<Sequence*>& out) {
        std::vector<ServeRequest> incoming;
        const bool open = source(room, idle, incoming);
        for (ServeRequest& request : incoming) {
          try {
            Sequence seq = impl.make_sequence(request.prompt, request.params);
            seq.index = next_id;
            Live& entry = live.try_emplace(next_id++, Live{std::move(seq), std::move(request)}).first->second;
            out.push_back(&entry.seq);
          } catch (const Error& e) {
            if (request.on_error) request.on_error(e.what());
          }
        }
        return open;
      },
      [&](std::vector<Sequence*>& out) {
        for (auto& [id, entry] : live) {
          if (entry.request.cancelled && entry.request.cancelled()) out.push_back(&entry.seq);
        }
      },
      [&](Sequence& seq) {
        Live& entry = live.at(seq.index);
        entry.send_progress();
        if (entry.request.on_output) entry.request.on_output(impl.make_output(seq));
        live.erase(seq.index);
      },
      [&] {
        for (auto& [id, entry] : live) entry.send_progress();
      });
}

}  // namespace jet
