"""What a dataset-aligned profile draws where the dataset says nothing: first names by gender, last names, traits
and careers (the MovieLens-1M occupation names)."""

from __future__ import annotations

import numpy as np

from recagent_gym.data.fields import ML1M_OCCUPATIONS

FEMALE_NAMES = (
    "Alice",
    "Amara",
    "Anna",
    "Chloe",
    "Elena",
    "Emma",
    "Fatima",
    "Grace",
    "Hana",
    "Isabel",
    "Julia",
    "Keiko",
    "Laura",
    "Leila",
    "Maria",
    "Maya",
    "Nadia",
    "Olivia",
    "Priya",
    "Rosa",
    "Sara",
    "Sofia",
    "Wen",
    "Zoe",
)
MALE_NAMES = (
    "Adam",
    "Ahmed",
    "Carlos",
    "Daniel",
    "David",
    "Diego",
    "Ethan",
    "Felix",
    "Hiro",
    "Ivan",
    "James",
    "Jonas",
    "Kwame",
    "Leo",
    "Lucas",
    "Marco",
    "Mateo",
    "Noah",
    "Omar",
    "Paul",
    "Ravi",
    "Samuel",
    "Tom",
    "Wei",
)
LAST_NAMES = (
    "Adams",
    "Baker",
    "Chen",
    "Costa",
    "Diaz",
    "Evans",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kim",
    "Kowalski",
    "Lopez",
    "Martin",
    "Nguyen",
    "Novak",
    "Okafor",
    "Patel",
    "Rossi",
    "Silva",
    "Smith",
    "Tanaka",
    "Wang",
)
TRAITS = (
    "adventurous",
    "analytical",
    "ambitious",
    "calm",
    "cautious",
    "cheerful",
    "compassionate",
    "curious",
    "energetic",
    "imaginative",
    "introverted",
    "nostalgic",
    "optimistic",
    "outgoing",
    "patient",
    "practical",
    "romantic",
    "sceptical",
    "sociable",
    "thoughtful",
    "witty",
)
CAREERS = tuple(name for code, name in ML1M_OCCUPATIONS.items() if code != 0)


def draw_name(gender: str, used: set[str], rng: np.random.Generator) -> str:
    """A first and last name not in ``used`` (added to it); repeats are numbered once the pairs run out."""
    firsts = {"female": FEMALE_NAMES, "male": MALE_NAMES}.get(gender, FEMALE_NAMES + MALE_NAMES)
    for _ in range(50):
        name = f"{rng.choice(firsts)} {rng.choice(LAST_NAMES)}"
        if name not in used:
            break
    else:  # more users than likely combinations: number the repeats, as RecAgent does
        stem, k = name, 2
        while f"{stem} {k}" in used:
            k += 1
        name = f"{stem} {k}"
    used.add(name)
    return name
