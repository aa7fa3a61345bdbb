"""Asks a model folder's questions through `lockstep serve`, as a user's client would, and prints
how many it answers right, task by task: the figures of the embedded model's card.

    python3 tools/tiny_model/ask_served.py --model models/tiny-arith [--lockstep build/lockstep]
        [--questions FILE.jsonl] [--typed] [--products] [--port 8391] [--wrong FILE.json]

--questions: a JSON-lines file of {"task", "question", "answer"} (default: the folder's
heldout.jsonl). --typed adds 420 questions written the way people type, from words and
sentences none of corpus.py's lists hold (doubled letters to count, long words to reverse,
"What's A times B?"). --products adds 200 two-digit products typed plainly ("What is A * B?",
pairs from seed 7). Greedy, exact match of the whole reply. --wrong writes the misses.
"""
import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import time
import urllib.request


def typed_questions():
    """(task, question, answer): the --typed set, the same every run."""
    rng = random.Random(11)
    words = ["hello", "coffee", "balloon", "mississippi", "bookkeeper", "letter", "pepper", "xylophone", "queue",
             "llama", "butter", "assess", "kangaroo", "giraffe", "committee", "success", "grass", "tomorrow",
             "abracadabra", "noon"]
    out = []
    for w in words:
        c = rng.choice(w)
        for frame in ["How many {c}'s are in {w}?", "count the {c} in {w}",
                      "how many times does {c} occur in the word {w}?", "{w} - how many {c}?"]:
            out.append(("count", frame.format(c=c, w=w), str(w.count(c))))
        for frame in ["reverse {w}", "What is {w} spelled backward?", "Can you write {w} backwards please?"]:
            out.append(("reverse", frame.format(w=w), w[::-1]))
    for _ in range(20):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        for frame in ["What's {a} times {b}?", "{a} x {b} = ?", "multiply {a} with {b}",
                      "what do you get if you multiply {a} and {b}?", "I'd like to know {a} times {b}"]:
            out.append(("mul", frame.format(a=a, b=b), str(a * b)))
    for _ in range(20):
        a, b = rng.randint(1, 9999), rng.randint(1, 9999)
        for frame in ["What's {a} plus {b}?", "add {a} + {b}", "{a} + {b} is what?"]:
            out.append(("add", frame.format(a=a, b=b), str(a + b)))
        a, b = max(a, b), min(a, b)
        for frame in ["What's {a} minus {b}?", "{a} - {b} is what?", "subtract {b} from {a} please"]:
            out.append(("sub", frame.format(a=a, b=b), str(a - b)))
    for _ in range(20):
        xs = [rng.randint(0, 999) for _ in range(rng.randint(2, 8))]
        for frame, separator in [("Sort {xs}", ", "), ("Please sort these: {xs}", ", "),
                                 ("sort in ascending order {xs}", " ")]:
            out.append(("sort", frame.format(xs=separator.join(map(str, xs))), separator.join(map(str, sorted(xs)))))
    return out


def product_questions():
    rng = random.Random(7)
    pairs = [(rng.randint(10, 99), rng.randint(10, 99)) for _ in range(200)]
    return [("mul", f"What is {a} * {b}?", str(a * b)) for a, b in pairs]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--lockstep", default=os.path.join(here, "..", "..", "build", "lockstep"))
    parser.add_argument("--questions")
    parser.add_argument("--typed", action="store_true")
    parser.add_argument("--products", action="store_true")
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--wrong")
    args = parser.parse_args()

    path = args.questions or os.path.join(args.model, "heldout.jsonl")
    with open(path) as f:
        questions = [(os.path.basename(path), q["task"], q["question"], q["answer"]) for q in map(json.loads, f)]
    questions += [("typed",) + q for q in typed_questions()] if args.typed else []
    questions += [("products",) + q for q in product_questions()] if args.products else []

    server = subprocess.Popen([args.lockstep, "serve", "--model", args.model, "--port", str(args.port),
                               "--parallel", "8"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/health")
                break
            except OSError:
                time.sleep(0.2)

        def ask(question):
            body = json.dumps({"messages": [{"role": "user", "content": question}], "max_tokens": 40,
                               "temperature": 0}).encode()
            request = urllib.request.Request(base + "/v1/chat/completions", body, {"Content-Type": "application/json"})
            return json.load(urllib.request.urlopen(request))["choices"][0]["message"]["content"]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(ask, [q for _, _, q, _ in questions]))
    finally:
        server.terminate()
        server.wait()

    right = {}  # (set, task) -> [right, asked]
    for (name, task, _, answer), reply in zip(questions, replies):
        for key in ((name, task), (name, "all")):
            counts = right.setdefault(key, [0, 0])
            counts[0] += reply == answer
            counts[1] += 1
    for (name, task), (good, total) in sorted(right.items(), key=lambda item: (item[0][0], item[0][1] == "all")):
        print(f"{name:14s} {task:9s} {good:3d} / {total:3d}")
    if args.wrong:
        with open(args.wrong, "w") as f:
            json.dump([{"question": q, "answer": a, "reply": r}
                       for (_, _, q, a), r in zip(questions, replies) if r != a], f, indent=1)


if __name__ == "__main__":
    main()
