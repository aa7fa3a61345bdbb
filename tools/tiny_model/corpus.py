"""The tiny model's task corpus: chat questions with exact answers, generated from a seed.

Tasks: addition and subtraction of numbers up to 4 digits, multiplication of 2-digit numbers,
sorting up to 8 numbers, reversing a word, counting a letter in a word; several phrasings each.
"""
import random

WORDS = """apple river planet garden silver window market orange button candle doctor engine
forest guitar hammer island jacket kitten ladder mirror needle ocean pencil rabbit saddle
ticket violin wallet yellow zipper anchor basket carpet dragon eagle falcon goblet harbor
insect jungle kettle lemon magnet napkin object parrot quartz rocket sunset tunnel umbrella
velvet walnut bridge castle cherry cotton desert dinner flower friend frozen gentle golden
honest hunter icicle jelly kernel lantern meadow monkey number pepper pillow puzzle rainbow
summer spider spring stone sugar table thunder tomato travel turtle valley winter wizard
yogurt zebra banana camera circle cookie copper crystal dolphin feather garlic glacier
hollow horizon journal kingdom leather marble mountain nectar noodle orbit pirate pocket
powder ribbon salmon shadow silk socket spiral statue tiger timber toast tower velvet
voyage whale willow window wonder""".split()

ADD = ["What is {a} + {b}?", "Compute {a} plus {b}.", "Add {a} and {b}.", "What is the sum of {a} and {b}?"]
SUB = ["What is {a} - {b}?", "Compute {a} minus {b}.", "Subtract {b} from {a}.", "What is {a} take away {b}?"]
MUL = ["What is {a} * {b}?", "Compute {a} times {b}.", "Multiply {a} by {b}.", "What is the product of {a} and {b}?"]
SORT = ["Sort these numbers: {xs}", "Put in ascending order: {xs}", "Sort from smallest to largest: {xs}"]
REVERSE = ["Reverse the word {w}.", "Spell {w} backwards.", "What is {w} written in reverse?"]
COUNT = ["How many times does the letter {c} appear in {w}?", "Count the letter {c} in {w}.",
         "How many {c}s are in the word {w}?"]

TASKS = ["add", "sub", "mul", "sort", "reverse", "count"]


def example(task, rng):
    """One (question, answer) of `task`."""
    if task == "add":
        a, b = rng.randint(0, 9999), rng.randint(0, 9999)
        return rng.choice(ADD).format(a=a, b=b), str(a + b)
    if task == "sub":
        a, b = rng.randint(0, 9999), rng.randint(0, 9999)
        a, b = max(a, b), min(a, b)
        return rng.choice(SUB).format(a=a, b=b), str(a - b)
    if task == "mul":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return rng.choice(MUL).format(a=a, b=b), str(a * b)
    if task == "sort":
        xs = [rng.randint(0, 99) for _ in range(rng.randint(2, 8))]
        return rng.choice(SORT).format(xs=" ".join(map(str, xs))), " ".join(map(str, sorted(xs)))
    if task == "reverse":
        w = rng.choice(WORDS)
        return rng.choice(REVERSE).format(w=w), w[::-1]
    w = rng.choice(WORDS)
    c = rng.choice(w) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    return rng.choice(COUNT).format(c=c, w=w), str(w.count(c))


# Training draws tasks by weight: the arithmetic with carries and borrows needs the most data.
TRAINING_WEIGHTS = {"add": 0.25, "sub": 0.30, "mul": 0.20, "sort": 0.10, "reverse": 0.05, "count": 0.10}


def training_examples(seed, count):
    """`count` examples with tasks drawn by TRAINING_WEIGHTS, from `seed`."""
    rng = random.Random(seed)
    tasks = rng.choices(list(TRAINING_WEIGHTS), weights=list(TRAINING_WEIGHTS.values()), k=count)
    return [(task,) + example(task, rng) for task in tasks]


def examples(seed, count):
    """`count` examples, tasks in turn, from `seed`: a list of (task, question, answer)."""
    rng = random.Random(seed)
    return [(TASKS[i % len(TASKS)],) + example(TASKS[i % len(TASKS)], rng) for i in range(count)]
