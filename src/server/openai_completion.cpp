// One completion request as one stream: submit it to the lane host, then turn its events into
// the reply (one JSON body, or server-sent events), watching for the client going away.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

#include "server/openai_format.h"
#include "server/openai_server.h"
#include "server/reasoning.h"
#include "server/stop_strings.h"
#include "server/stream_channel.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

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

// One choice of a reply: its stream, and its text as it arrives.
struct Choice {
  Choice(const ModelText& model_text, const std::vector<std::string>& stops, bool chat,
         const std::vector<int32_t>& prompt)
      : text(model_text, stops) {
    // Chat replies keep their thinking apart (reasoning.h); the prompt may open it.
    if (chat && model_text.has_tokenizer()) {
      const Tokenizer& tokenizer = model_text.tokenizer();
      const size_t tail = std::min<size_t>(prompt.size(), 16);
      splitter.emplace(prompt_opens_thinking(
          tokenizer.decode(std::vector<int32_t>(prompt.end() - int64_t(tail), prompt.end()))));
      // Think tags that are special tokens never reach the reply's text (special tokens are
      // skipped): their ids switch the splitter instead.
      for (auto [tag, id] : {std::pair{"<think>", &open_id}, {"</think>", &close_id}})
        if (auto found = tokenizer.token_to_id(tag); found && tokenizer.is_special(*found)) *id = *found;
    }
  }
  // A piece of reply text, split into (reasoning, content).
  ReasoningSplitter::Pieces split(const std::string& piece) {
    if (!splitter) return {"", piece};
    return splitter->push(piece);
  }
  // The text token `id` adds, split; a special think tag's id adds its tag.
  ReasoningSplitter::Pieces split_token(int32_t id) {
    // A token of the think block (its tags too) is a reasoning token of the usage.
    if (splitter && (splitter->thinking() || id == open_id)) ++reasoning_tokens;
    ReasoningSplitter::Pieces pieces = split(text.push(id));
    if (splitter && (id == open_id || id == close_id)) {
      const ReasoningSplitter::Pieces tag = splitter->push(id == open_id ? "<think>" : "</think>");
      pieces.reasoning += tag.reasoning;
      pieces.content += tag.content;
    }
    return pieces;
  }

  // With tools: the content's calls taken out of it (tool_calls.h); `calls` keeps them all.
  ReasoningSplitter::Pieces take_calls(ReasoningSplitter::Pieces pieces, bool last = false) {
    if (!tools) return pieces;
    pieces.content = tools->push(pieces.content);
    if (last) pieces.content += tools->finish();
    for (ToolCall& call : tools->take())
      if (parallel || calls.empty()) calls.push_back(std::move(call));
    return pieces;
  }

  StreamHandle handle;
  ReplyText text;
  std::optional<ToolCallParser> tools;
  bool parallel = true;
  std::vector<ToolCall> calls;
  size_t calls_sent = 0;  // streamed so far
  std::optional<ReasoningSplitter> splitter;
  int32_t open_id = -1, close_id = -1;  // think tags that are special tokens
  std::string reply, reasoning;
  std::vector<int32_t> ids, chunk_ids;
  std::vector<TokenLogprobs> logprobs, chunk_logprobs;
  // Echo: the prompt's text, its first id and its logprobs (with logprobs); streamed once.
  std::string echo;
  int64_t reasoning_tokens = 0;  // of the ids, those inside the think block
  bool echo_is_text = false;  // the client's text prompt (else a prompt of ids, echoed decoded)
  std::optional<int32_t> lead;
  std::vector<TokenLogprobs> prompt_logprobs;
  bool echo_sent = false;
  TextOffset text_offset;  // the characters of this choice's text its logprobs have covered
  std::optional<StreamEnd> end;
  bool first_chunk = true;
  bool stopped = false;  // cut at a stop string: its stream was cancelled for it
  std::optional<std::chrono::steady_clock::time_point> last_token;
};

}  // namespace

void OpenAiServer::completion(const HttpRequest& request, HttpResponder& responder, bool chat) {
  const auto received = std::chrono::steady_clock::now();
  // A long chat template render gives up when its client leaves or the server stops; so does
  // the wait of a large body for a parse slot, which it holds while its trees are alive.
  const std::function<bool()> cancelled = [&] { return stopping_.load() || responder.client_gone(); };
  std::variant<CompletionRequest, RequestError> parsed = RequestError{503, "the server is stopping", "server_error", "", ""};
  {
    ParseGate::Pass pass(parse_gate_, request.body.size(), cancelled);
    if (pass.entered()) parsed = parse_completion_request(request.body, chat, context_, cancelled);
  }
  if (auto* error = std::get_if<RequestError>(&parsed)) return send_error(responder, *error, "invalid");
  CompletionRequest& req = std::get<CompletionRequest>(parsed);

  // Choice i of prompt p (index p * n + i) is the stream of that prompt with seed + i: the same
  // tokens as that request alone.
  const LaneSettings& lanes = lanes_.settings();
  const size_t streams = req.prompts.size() * size_t(req.n);
  if (streams > 1 && int64_t(streams) > int64_t(lanes.max_streams) + lanes.max_queue)
    return send_error(responder, {400, std::to_string(streams) + " choices (prompts times n) are more streams than this "
                                       "server runs and queues at once (" + std::to_string(lanes.max_streams + lanes.max_queue) + ")",
                                  "invalid_request_error", req.prompts.size() > 1 ? "prompt" : "n", ""},
                      "invalid");
  auto channel = std::make_shared<StreamChannel>();
  std::vector<std::unique_ptr<Choice>> choices;
  const uint64_t seed = req.generate.sampling.seed;
  for (size_t k = 0; k < streams; ++k) {
    const PromptEntry& prompt = req.prompts[k / size_t(req.n)];
    const int32_t i = int32_t(k % size_t(req.n));
    choices.push_back(std::make_unique<Choice>(text_, req.stop, chat, prompt.ids));
    if (req.tool_format != ToolFormat::none) {
      // Call ids from the choice's own seed: choice i's are those of the request with seed + i alone.
      choices.back()->tools.emplace(req.tool_format, req.tools, seed + uint64_t(i), req.tool_forced);
      choices.back()->parallel = req.parallel_tool_calls;
    }
    if (req.echo) {
      choices.back()->echo = prompt.echo, choices.back()->lead = prompt.ids.front();
      choices.back()->echo_is_text = prompt.text;
    }
    GenerateRequest stream = req.generate;
    stream.prompt = prompt.ids;
    stream.sampling.seed = seed + uint64_t(i);
    auto submitted = lanes_.submit(std::move(stream), channel->events(req.generate.top_logprobs >= 0, int(k),
                                                                      req.generate.prompt_logprobs >= 0));
    if (submitted.error) {
      for (auto& choice : choices) choice->handle.cancel();
      bool busy = submitted.error->kind == SubmitError::Kind::busy;
      return send_error(responder, {busy ? 503 : 400, submitted.error->message,
                                    busy ? "server_busy" : "invalid_request_error", submitted.error->field, ""},
                        busy ? "busy" : "invalid");
    }
    choices.back()->handle = *submitted.handle;
  }
  auto cancel_all = [&] {
    for (auto& choice : choices) choice->handle.cancel();
  };

  ReplyHeader header{(chat ? "chatcmpl-" : "cmpl-") + id_prefix_ + std::to_string(next_id_++), int64_t(std::time(nullptr)),
                     settings_.model_name, chat, seed};
  bool client_gone = false, any_token = false;

  if (req.stream) {
    responder.start_stream(200, "text/event-stream");
    responder.set_probe_chunk(": probe\n\n");  // an SSE comment: clients skip it
  }
  // A chunk of the stream; with include_usage each has "usage": null until the last, as OpenAI's do.
  auto write = [&](nlohmann::json chunk) {
    if (req.include_usage) chunk["usage"] = nullptr;
    return responder.write_chunk(sse(chunk));
  };
  // A chat choice's stream opens as OpenAI's does, with a chunk of the role alone (clients such as
  // openai-node's stream helper start the message from it, and would count logprobs on it twice).
  auto send_role = [&](Choice& choice, int index) {
    if (!chat || !choice.first_chunk || client_gone) return;
    choice.first_chunk = false;
    nlohmann::json role = stream_chunk(header, "", true, nullptr, nullptr, "", "", index);
    // A forced call's reply says nothing but the call: its content is null.
    if (req.tool_forced) role["choices"][0]["delta"]["content"] = nullptr;
    if (!write(std::move(role))) {
      client_gone = true;
      cancel_all();
    }
  };
  auto send_chunk = [&](Choice& choice, int index, const ReasoningSplitter::Pieces& delta, const std::string& finish) {
    send_role(choice, index);
    if (client_gone) return;
    const std::vector<int32_t>* chunk_ids_ptr = req.return_token_ids ? &choice.chunk_ids : nullptr;
    nlohmann::json lp = chat ? chat_logprobs_json(text_, choice.chunk_logprobs)
                             : completion_logprobs_json(text_, std::nullopt, choice.chunk_logprobs, choice.text_offset);
    nlohmann::json chunk = stream_chunk(header, delta.content, false, chunk_ids_ptr, lp, finish, delta.reasoning, index);
    if (!write(std::move(chunk))) {
      client_gone = true;
      cancel_all();
    }
    choice.first_chunk = false;
    choice.chunk_ids.clear();
    choice.chunk_logprobs.clear();
  };
  // An echoed prompt leads a streamed choice (with its logprobs, when asked), before its first
  // token: the prompt's logprobs have all come by then.
  auto send_echo = [&](Choice& choice, int index) {
    if (choice.echo_sent || !choice.lead || client_gone) return;
    choice.echo_sent = true;
    const std::optional<int32_t> lead = req.generate.prompt_logprobs >= 0 ? choice.lead : std::nullopt;
    nlohmann::json lp = completion_logprobs_json(text_, lead, choice.prompt_logprobs, choice.text_offset,
                                          choice.echo, !choice.echo_is_text);
    if (!write(stream_chunk(header, choice.echo, false, nullptr, lp, "", "", index))) {
      client_gone = true;
      cancel_all();
    }
  };
  // Each new call as OpenAI streams one: its id and name, then its arguments.
  auto send_calls = [&](Choice& choice, int index) {
    if (choice.calls_sent < choice.calls.size()) send_role(choice, index);
    for (; choice.calls_sent < choice.calls.size() && !client_gone; ++choice.calls_sent) {
      const ToolCall& call = choice.calls[choice.calls_sent];
      const int k = int(choice.calls_sent);
      nlohmann::json named = stream_chunk(header, "", false, nullptr, nullptr, "", "", index);
      named["choices"][0]["delta"].erase("content");
      named["choices"][0]["delta"]["tool_calls"] = {
          {{"index", k}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}}};
      nlohmann::json arguments = stream_chunk(header, "", false, nullptr, nullptr, "", "", index);
      arguments["choices"][0]["delta"].erase("content");
      arguments["choices"][0]["delta"]["tool_calls"] = {{{"index", k}, {"function", {{"arguments", call.arguments}}}}};
      if (!write(std::move(named)) || !write(std::move(arguments))) {
        client_gone = true;
        cancel_all();
      }
    }
  };

  auto last_check = std::chrono::steady_clock::now();
  for (size_t ended = 0; ended < choices.size();) {
    std::optional<ChannelEvent> event = channel->next(kClientCheck);
    // Look for a departed client every kClientCheck, whether or not tokens keep coming.
    if (!client_gone && std::chrono::steady_clock::now() - last_check >= kClientCheck) {
      last_check = std::chrono::steady_clock::now();
      if (responder.client_gone()) {
        client_gone = true;
        cancel_all();
      }
    }
    if (!event) continue;
    Choice& choice = *choices[size_t(event->choice)];
    if (event->prompt_logprobs) choice.prompt_logprobs.push_back(*event->prompt_logprobs);
    if (req.stream && (event->token || event->end)) send_echo(choice, event->choice);
    if (event->logprobs && !choice.stopped) {
      choice.logprobs.push_back(*event->logprobs);
      choice.chunk_logprobs.push_back(*event->logprobs);
    }
    if (event->token) {
      if (choice.last_token)
        metrics_.gap_between_tokens(std::chrono::duration<double>(event->at - *choice.last_token).count());
      else if (!any_token)
        metrics_.time_to_first_token(std::chrono::duration<double>(event->at - received).count());
      choice.last_token = event->at;
      any_token = true;
      if (choice.stopped) continue;
      choice.ids.push_back(*event->token);
      choice.chunk_ids.push_back(*event->token);
      const ReasoningSplitter::Pieces delta = choice.take_calls(choice.split_token(*event->token));
      choice.reply += delta.content;
      choice.reasoning += delta.reasoning;
      if (choice.text.stopped()) {
        choice.stopped = true;
        choice.handle.cancel();
      }
      const bool any_text = !delta.content.empty() || !delta.reasoning.empty();
      if (req.stream) send_role(choice, event->choice);  // a chat stream's first chunk, alone
      if (req.stream && (any_text || req.return_token_ids || !choice.chunk_logprobs.empty() || (!chat && choice.first_chunk)))
        send_chunk(choice, event->choice, delta, "");
      if (req.stream) send_calls(choice, event->choice);
    }
    if (event->end && !choice.end) {
      choice.end = event->end;
      ++ended;
    }
  }

  if (client_gone) {
    metrics_.request_done("cancelled");
    return;
  }
  // A stream cancelled while its client is still there, and not by a stop string, was cancelled
  // by stop(): the server is shutting down. A stream's reply ends as usual, with finish_reason
  // "cancelled"; a reply not yet begun is a 503.
  bool shutting_down = false, failed = false;
  std::string error;
  for (auto& choice : choices) {
    shutting_down |= choice->end->kind == StreamEnd::Kind::cancelled && !choice->stopped;
    if (choice->end->kind == StreamEnd::Kind::failed) failed = true, error = choice->end->error;
  }
  if (shutting_down && !req.stream) {
    send_error(responder, {503, "the server is shutting down", "server_busy", "", ""}, "cancelled");
    return;
  }
  if (failed && !shutting_down) {
    cancel_all();
    if (req.stream) {
      (void)responder.write_chunk(sse({{"error", {{"message", error}, {"type", "server_error"}}}}));
      responder.end_stream();
    } else {
      responder.send(500, "application/json", error_body({500, error, "server_error", "", ""}));
    }
    metrics_.request_done("failed");
    return;
  }
  // The usage of every choice together: the prompt once, every choice's tokens and drafts.
  StreamEnd all = *choices.front()->end;
  size_t completion_tokens = 0, prompt_tokens = 0;
  for (const PromptEntry& prompt : req.prompts) prompt_tokens += prompt.ids.size();
  all.drafted = all.accepted_drafts = 0;
  for (auto& choice : choices) {
    completion_tokens += choice->ids.size();
    all.drafted += choice->end->drafted;
    // Tokens after a stop string are not the reply's, drafts or not.
    all.accepted_drafts += std::min<int64_t>(choice->end->accepted_drafts, int64_t(choice->ids.size()));
  }
  nlohmann::json usage = usage_json(prompt_tokens, completion_tokens, all);
  int64_t reasoning_tokens = 0;
  for (auto& choice : choices) reasoning_tokens += std::min<int64_t>(choice->reasoning_tokens, int64_t(choice->ids.size()));
  usage["completion_tokens_details"]["reasoning_tokens"] = reasoning_tokens;
  nlohmann::json replies = nlohmann::json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    Choice& choice = *choices[i];
    ReasoningSplitter::Pieces tail = choice.split(choice.stopped ? std::string() : choice.text.finish());
    if (choice.splitter) {
      const ReasoningSplitter::Pieces held = choice.splitter->finish();
      tail.reasoning += held.reasoning;
      tail.content += held.content;
    }
    tail = choice.take_calls(tail, true);
    choice.reply += tail.content;
    choice.reasoning += tail.reasoning;
    const bool stopped = choice.stopped || choice.end->reason == FinishReason::stop;
    // A reply that called tools ends with "tool_calls", unless tool_choice named the function.
    const std::string finish_reason = shutting_down ? "cancelled"
                                      : stopped && !choice.calls.empty() && !req.tool_named ? "tool_calls"
                                      : stopped ? "stop"
                                                : finish_reason_name(choice.end->reason);
    if (req.stream) {
      send_calls(choice, int(i));
      send_chunk(choice, int(i), tail, finish_reason);
    } else {
      nlohmann::json lp;
      if (chat) {
        lp = chat_logprobs_json(text_, choice.logprobs);
      } else if (req.generate.top_logprobs >= 0) {
        // With echo, the prompt's tokens come first: its first without a logprob, then the rest.
        if (req.generate.prompt_logprobs >= 0)
          lp = completion_logprobs_json(text_, choice.lead, choice.prompt_logprobs, choice.text_offset,
                                          choice.echo, !choice.echo_is_text);
        append_logprobs(lp, completion_logprobs_json(text_, std::nullopt, choice.logprobs, choice.text_offset));
      }
      nlohmann::json reply = reply_choice(header, int(i), choice.echo + choice.reply,
                                          req.return_token_ids ? &choice.ids : nullptr, lp, finish_reason,
                                          choice.splitter && choice.splitter->thought() ? &choice.reasoning : nullptr);
      if (!choice.calls.empty()) {
        nlohmann::json calls = nlohmann::json::array();
        for (const ToolCall& call : choice.calls)
          calls.push_back({{"id", call.id}, {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        reply["message"]["tool_calls"] = calls;
        if (choice.reply.find_first_not_of(" \t\r\n") == std::string::npos) reply["message"]["content"] = nullptr;
      } else if (req.tool_forced && choice.reply.empty()) {
        reply["message"]["content"] = nullptr;  // a forced call cut short: nothing was said
      }
      replies.push_back(reply);
    }
  }
  if (req.stream) {
    if (req.include_usage && !client_gone) {
      nlohmann::json chunk = stream_chunk(header, "", false, nullptr, nullptr, "");
      chunk["choices"] = nlohmann::json::array();
      chunk["usage"] = usage;
      (void)responder.write_chunk(sse(chunk));
    }
    if (!client_gone) (void)responder.write_chunk("data: [DONE]\n\n");
    responder.end_stream();
  } else {
    responder.send(200, "application/json", json_text(full_reply(header, replies, usage, seed)));
  }
  metrics_.request_done(shutting_down ? "cancelled" : "ok");
}

}  // namespace lockstep
