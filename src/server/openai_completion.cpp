// One completion request as one stream: submit it to the lane host, then turn its events into
// the reply (one JSON body, or server-sent events), watching for the client going away.
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

#include "server/openai_format.h"
#include "server/openai_server.h"
#include "server/stop_strings.h"
#include "server/stream_channel.h"
#include "tokenizer/streaming_detokenizer.h"

namespace lockstep {

namespace {

constexpr std::chrono::milliseconds kClientCheck{50};

// JSON text; invalid UTF-8 (a byte-level token's piece) becomes U+FFFD instead of throwing.
std::string json_text(const nlohmann::json& value) { return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string sse(const nlohmann::json& payload) { return "data: " + json_text(payload) + "\n\n"; }

// Decoded text of the generated ids, cut at stop strings.
class ReplyText {
 public:
  ReplyText(const ModelText& text, std::vector<std::string> stops) : stops_(std::move(stops)) {
    if (text.has_tokenizer()) detokenizer_.emplace(text.tokenizer(), true);
  }
  // The text now safe to send after `id`.
  std::string push(int32_t id) { return detokenizer_ ? stops_.push(detokenizer_->push(id)) : std::string(); }
  std::string finish() {
    if (!detokenizer_) return {};
    std::string tail = stops_.push(detokenizer_->finish());
    return tail + stops_.finish();
  }
  bool stopped() const { return stops_.stopped(); }

 private:
  std::optional<StreamingDetokenizer> detokenizer_;
  StopMatcher stops_;
};

}  // namespace

void OpenAiServer::completion(const HttpRequest& request, HttpResponder& responder, bool chat) {
  const auto received = std::chrono::steady_clock::now();
  // A long chat template render gives up when its client leaves or the server stops.
  auto parsed = parse_completion_request(request.body, chat, context_,
                                         [&] { return stopping_.load() || responder.client_gone(); });
  if (auto* error = std::get_if<RequestError>(&parsed)) return send_error(responder, *error, "invalid");
  CompletionRequest& req = std::get<CompletionRequest>(parsed);

  auto channel = std::make_shared<StreamChannel>();
  auto submitted = lanes_.submit(req.generate, channel->events(req.generate.top_logprobs >= 0));
  if (submitted.error) {
    bool busy = submitted.error->kind == SubmitError::Kind::busy;
    return send_error(responder, {busy ? 503 : 400, submitted.error->message, busy ? "server_busy" : "invalid_request_error",
                                  submitted.error->field, ""},
                      busy ? "busy" : "invalid");
  }
  const StreamHandle handle = *submitted.handle;

  ReplyHeader header{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++), int64_t(std::time(nullptr)),
                     settings_.model_name, chat, req.generate.sampling.seed};
  ReplyText text(text_, req.stop);
  std::string reply = req.echo ? req.prompt_text : std::string();
  std::vector<int32_t> ids, chunk_ids;
  std::vector<TokenLogprobs> logprobs, chunk_logprobs;
  std::optional<StreamEnd> end;
  bool client_gone = false, first_chunk = true, cancelled_by_stop = false;
  std::optional<std::chrono::steady_clock::time_point> last_token;

  if (req.stream) {
    responder.start_stream(200, "text/event-stream");
    responder.set_probe_chunk(": probe\n\n");  // an SSE comment: clients skip it
  }
  auto send_chunk = [&](const std::string& delta, const std::string& finish) {
    if (client_gone) return;
    const std::vector<int32_t>* chunk_ids_ptr = req.return_token_ids ? &chunk_ids : nullptr;
    nlohmann::json lp = logprobs_json(text_, chunk_logprobs, chat, 0);
    if (!responder.write_chunk(sse(stream_chunk(header, delta, first_chunk, chunk_ids_ptr, lp, finish)))) {
      client_gone = true;
      handle.cancel();
    }
    first_chunk = false;
    chunk_ids.clear();
    chunk_logprobs.clear();
  };

  auto last_check = std::chrono::steady_clock::now();
  while (!end) {
    std::optional<ChannelEvent> event = channel->next(kClientCheck);
    // Look for a departed client every kClientCheck, whether or not tokens keep coming.
    if (!client_gone && std::chrono::steady_clock::now() - last_check >= kClientCheck) {
      last_check = std::chrono::steady_clock::now();
      if (responder.client_gone()) {
        client_gone = true;
        handle.cancel();
      }
    }
    if (!event) continue;
    if (event->logprobs && !cancelled_by_stop) {
      logprobs.push_back(*event->logprobs);
      chunk_logprobs.push_back(*event->logprobs);
    }
    if (event->token) {
      if (last_token) metrics_.gap_between_tokens(std::chrono::duration<double>(event->at - *last_token).count());
      else metrics_.time_to_first_token(std::chrono::duration<double>(event->at - received).count());
      last_token = event->at;
      if (cancelled_by_stop) continue;
      ids.push_back(*event->token);
      chunk_ids.push_back(*event->token);
      std::string delta = text.push(*event->token);
      reply += delta;
      if (text.stopped()) {
        cancelled_by_stop = true;
        handle.cancel();
      }
      if (req.stream && (!delta.empty() || req.return_token_ids || !chunk_logprobs.empty() || first_chunk))
        send_chunk(delta, "");
    }
    if (event->end) end = event->end;
  }

  const bool finished = end->kind == StreamEnd::Kind::finished || cancelled_by_stop;
  if (client_gone) {
    metrics_.request_done("cancelled");
    return;
  }
  // A stream cancelled while its client is still there was cancelled by stop(): the server is
  // shutting down. A stream's reply ends as usual, with finish_reason "cancelled"; a reply not
  // yet begun is a 503.
  const bool shutting_down = end->kind == StreamEnd::Kind::cancelled && !cancelled_by_stop;
  if (shutting_down && !req.stream) {
    send_error(responder, {503, "the server is shutting down", "server_busy", "", ""}, "cancelled");
    return;
  }
  if (!finished && !shutting_down) {
    if (req.stream) {
      (void)responder.write_chunk(sse({{"error", {{"message", end->error}, {"type", "server_error"}}}}));
      responder.end_stream();
    } else {
      responder.send(500, "application/json", error_body({500, end->error, "server_error", "", ""}));
    }
    metrics_.request_done("failed");
    return;
  }
  std::string tail = cancelled_by_stop ? std::string() : text.finish();
  reply += tail;
  std::string finish_reason = shutting_down ? "cancelled"
                              : cancelled_by_stop || end->reason == FinishReason::stop
                                  ? "stop"
                                  : finish_reason_name(end->reason);
  if (req.stream) {
    send_chunk(tail, finish_reason);
    if (req.include_usage && !client_gone) {
      nlohmann::json usage = stream_chunk(header, "", false, nullptr, nullptr, "");
      usage["choices"] = nlohmann::json::array();
      usage["usage"] = usage_json(req.generate.prompt.size(), ids.size(), *end);
      (void)responder.write_chunk(sse(usage));
    }
    if (!client_gone) (void)responder.write_chunk("data: [DONE]\n\n");
    responder.end_stream();
  } else {
    nlohmann::json body = full_reply(header, reply, req.return_token_ids ? &ids : nullptr,
                                     logprobs_json(text_, logprobs, chat, 0), finish_reason,
                                     usage_json(req.generate.prompt.size(), ids.size(), *end),
                                     req.generate.sampling.seed);
    responder.send(200, "application/json", json_text(body));
  }
  metrics_.request_done(shutting_down ? "cancelled" : "ok");
}

}  // namespace lockstep
