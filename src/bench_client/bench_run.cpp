#include "bench_client/bench_run.h"

#include <map>
#include <random>
#include <sstream>

namespace lockstep::bench {

namespace {

Cell make_cell(const Target& target, const std::vector<std::string>& prompts, int streams, double temperature,
               int tokens, std::optional<bool> draft) {
  Cell cell{streams, temperature, {}, {}, draft};
  for (int i = 0; i < streams; ++i) {
    std::optional<uint64_t> seed;
    if (temperature > 0) seed = uint64_t(1234 + i);
    const std::string& prompt = prompts[size_t(i) % prompts.size()];
    cell.requests.push_back(completion_body(target, prompt_json(target, prompt), tokens, temperature, seed));
    if (draft) {  // and the usage chunk, which says how many drafts the server verified
      cell.requests.back()["draft"] = *draft;
      cell.requests.back()["stream_options"] = {{"include_usage", true}};
    }
  }
  return cell;
}

// Which (cell, rep) runs when: cell by cell; or, serial, rep by rep with the cells in a fresh
// shuffled order each time, so that drift in the machine spreads over every cell.
std::vector<std::pair<size_t, int>> run_order(size_t cells, const SweepSettings& settings) {
  std::vector<std::pair<size_t, int>> order;
  if (!settings.serial) {
    for (size_t cell = 0; cell < cells; ++cell)
      for (int rep = 0; rep < settings.reps; ++rep) order.emplace_back(cell, rep);
    return order;
  }
  std::mt19937_64 random(settings.shuffle_seed);
  for (int rep = 0; rep < settings.reps; ++rep) {
    std::vector<size_t> shuffled(cells);
    for (size_t i = 0; i < cells; ++i) shuffled[i] = i;
    for (size_t i = cells; i > 1; --i) std::swap(shuffled[i - 1], shuffled[random() % i]);  // Fisher-Yates
    for (size_t cell : shuffled) order.emplace_back(cell, rep);
  }
  return order;
}

std::string describe_difference(const std::vector<int32_t>& together, const std::vector<int32_t>& alone) {
  size_t at = 0;
  while (at < together.size() && at < alone.size() && together[at] == alone[at]) ++at;
  std::ostringstream out;
  out << "first differs at token " << at << " (" << together.size() << " tokens, alone " << alone.size() << ")";
  return out.str();
}

// Runs each distinct request of every cell alone and compares every concurrent reply with it.
Expected<Exactness> check_alone(const Target& target, const std::vector<Cell>& cells, std::ostream* progress) {
  std::map<std::string, std::vector<int32_t>> alone;  // request body -> its ids alone
  for (const Cell& cell : cells)
    for (const nlohmann::json& request : cell.requests) {
      const std::string key = request.dump();
      if (alone.count(key)) continue;
      Expected<TimedStream> reply = run_timed_stream(target.server, request, target.timeout_seconds);
      if (!reply.ok()) return reply.error();
      alone[key] = reply->ids;
    }
  if (progress) *progress << "lockstep: bench: ran " << alone.size() << " distinct requests alone" << std::endl;
  Exactness exactness;
  for (const Cell& cell : cells)
    for (size_t rep = 0; rep < cell.reps.size(); ++rep)
      for (size_t i = 0; i < cell.requests.size(); ++i) {
        const std::vector<int32_t>& together = cell.reps[rep].streams[i].ids;
        const std::vector<int32_t>& reference = alone[cell.requests[i].dump()];
        ++exactness.compared;
        if (together == reference) continue;
        ++exactness.differ;
        std::ostringstream line;
        line << cell.streams << " streams, " << cell_mode(cell) << ", rep " << rep + 1 << ", stream " << i
             << ": " << describe_difference(together, reference);
        exactness.differing.push_back(line.str());
      }
  return exactness;
}

// With `drafts` the cells come in pairs, drafts on then off: every reply with drafts against the
// same request's reply without them, in the same rep.
Exactness check_drafts(const std::vector<Cell>& cells) {
  Exactness exactness;
  for (size_t c = 0; c + 1 < cells.size(); c += 2) {
    const Cell &on = cells[c], &off = cells[c + 1];
    for (size_t rep = 0; rep < on.reps.size(); ++rep)
      for (size_t i = 0; i < on.requests.size(); ++i) {
        const std::vector<int32_t>& drafted = on.reps[rep].streams[i].ids;
        const std::vector<int32_t>& plain = off.reps[rep].streams[i].ids;
        const TimedStream& stream = on.reps[rep].streams[i];
        exactness.kept += stream.accepted_drafts;
        exactness.drafted += stream.accepted_drafts + stream.rejected_drafts;
        ++exactness.compared;
        if (drafted == plain) continue;
        ++exactness.differ;
        std::ostringstream line;
        line << on.streams << " streams, " << mode_name(on.temperature) << ", rep " << rep + 1 << ", stream " << i
             << ": with drafts " << describe_difference(drafted, plain);
        exactness.differing.push_back(line.str());
      }
  }
  return exactness;
}

}  // namespace

std::string cell_mode(const Cell& cell) {
  if (!cell.draft) return mode_name(cell.temperature);
  return mode_name(cell.temperature) + (*cell.draft ? ", drafts" : ", no drafts");
}

std::string mode_name(double temperature) {
  if (temperature <= 0) return "greedy";
  std::ostringstream name;
  name << "seeded T=" << temperature;
  return name.str();
}

Expected<SweepResult> run_sweep(const Target& target, const std::vector<std::string>& prompts,
                                const SweepSettings& settings, std::ostream* progress) {
  SweepResult result;
  for (int level : settings.levels)
    for (double temperature : settings.temperatures)
      for (std::optional<bool> draft : settings.drafts ? std::vector<std::optional<bool>>{true, false}
                                                       : std::vector<std::optional<bool>>{std::nullopt})
        result.cells.push_back(make_cell(target, prompts, level, temperature, settings.tokens, draft));
  for (Cell& cell : result.cells) cell.reps.resize(size_t(settings.reps));
  result.order = run_order(result.cells.size(), settings);
  for (int round = 0; round < settings.warmup; ++round)
    for (const Cell& cell : result.cells) {
      Expected<ConcurrentRun> run = run_concurrently(target.server, cell.requests, target.timeout_seconds);
      if (!run.ok()) return run.error();
      if (progress)
        *progress << "lockstep: bench: warm-up " << round + 1 << "/" << settings.warmup << ", " << cell.streams
                  << " streams, " << cell_mode(cell) << std::endl;
    }
  for (auto [index, rep] : result.order) {
    Cell& cell = result.cells[index];
    Expected<ConcurrentRun> run = run_concurrently(target.server, cell.requests, target.timeout_seconds);
    if (!run.ok()) return run.error();
    if (progress)
      *progress << "lockstep: bench: " << cell.streams << " streams, " << cell_mode(cell) << ", rep "
                << rep + 1 << "/" << settings.reps << ": " << run->tokens() << " tokens in " << run->wall_s << " s"
                << std::endl;
    cell.reps[size_t(rep)] = std::move(*run);
  }
  if (settings.alone) {
    Expected<Exactness> exactness = check_alone(target, result.cells, progress);
    if (!exactness.ok()) return exactness.error();
    result.exactness = std::move(*exactness);
  }
  if (settings.drafts) result.drafts_exactness = check_drafts(result.cells);
  return result;
}

}  // namespace lockstep::bench
