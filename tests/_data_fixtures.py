"""Small dataset folders in every supported format, written by the tests themselves (never copies of real data)."""

from __future__ import annotations

from pathlib import Path

DAY = 86_400
T0 = 978_300_000


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def ml_latest(folder: Path, *, extra_ratings: str = "", extra_movies: str = "", with_tags: bool = True) -> Path:
    """4 movies, 3 users; user 1 has 6 ratings, user 2 has 4, user 3 has 2; tags for movies 1 and 2."""
    write(
        folder / "movies.csv",
        "movieId,title,genres\n"
        "1,Toy Story (1995),Adventure|Animation|Children\n"
        '2,"American President, The (1995)",Comedy|Drama|Romance\n'
        "3,Untitled Thing,(no genres listed)\n"
        "5,Heat (1995),Action|Crime|Thriller\n" + extra_movies,
    )
    rows = [
        (1, 1, 4.0, T0),
        (1, 2, 3.5, T0 + 10),
        (1, 3, 1.0, T0 + DAY),
        (1, 5, 5.0, T0 + 2 * DAY),
        (2, 1, 5.0, T0 + 5),
        (2, 5, 2.0, T0 + 6),
        (3, 2, 0.5, T0 + 7),
        (1, 1, 4.5, T0 + 3 * DAY),
        (1, 5, 4.0, T0 + 4 * DAY),
        (2, 2, 3.0, T0 + 8),
        (2, 3, 2.5, T0 + 9),
        (3, 5, 1.0, T0 + 11),
    ]
    text = "userId,movieId,rating,timestamp\n" + "".join(f"{u},{m},{r},{t}\n" for u, m, r, t in rows)
    write(folder / "ratings.csv", text + extra_ratings)
    if with_tags:
        write(
            folder / "tags.csv",
            'userId,movieId,tag,timestamp\n2,1,pixar,1\n2,1,Pixar,2\n3,1,fun,3\n3,1,pixar,4\n9,2,"politics, drama",5\n',
        )
    return folder


def ml_1m(folder: Path, *, ratings_name: str = "ratings.dat", extra_ratings: str = "") -> Path:
    """3 movies (one title in latin-1), 3 users in users.dat; users 1 and 2 rate."""
    write(
        folder / "movies.dat",
        "1::Toy Story (1995)::Animation|Children's|Comedy\n"
        "2::Misérables, Les (1995)::Drama|Musical\n"
        "3::Heat (1995)::Action|Crime|Thriller\n",
        encoding="latin-1",
    )
    write(folder / "users.dat", "1::F::1::10::48067\n2::M::56::16::70072\n3::M::25::15::55117\n")
    write(
        folder / ratings_name,
        f"1::1::5::{T0}\n1::2::3::{T0 + 1}\n1::3::4::{T0 + DAY}\n2::3::2::{T0 + 5}\n2::1::1::{T0 + 6}\n"
        + extra_ratings,
    )
    return folder


def ml_100k(folder: Path) -> Path:
    """2 movies (flags: Animation+Comedy, unknown), 2 users, 3 ratings."""
    flags_1 = ["0"] * 19
    flags_1[3] = flags_1[5] = "1"
    flags_2 = ["1"] + ["0"] * 18
    write(
        folder / "u.item",
        "1|Toy Story (1995)|01-Jan-1995||http://x|" + "|".join(flags_1) + "\n"
        "2|unknown|01-Jan-1997||http://y|" + "|".join(flags_2) + "\n",
        encoding="latin-1",
    )
    write(folder / "u.user", "1|24|M|technician|85711\n2|53|F|other|94043\n")
    write(folder / "u.data", f"1\t1\t5\t{T0}\n1\t2\t3\t{T0 + 1}\n2\t1\t4\t{T0 + 2}\n")
    return folder


def recagent_csv(folder: Path, *, users_name: str = "user_1000.csv", relationships: bool = True) -> Path:
    """3 items, 3 users with RecAgent's profile columns, 2 relationships, 4 interactions."""
    write(
        folder / "item.csv",
        "id,title,genre,description\n"
        "0,Toy Story,Animation|Children's|Comedy,Toys come to life.\n"
        '1,Heat,Action|Crime,"A heist, and a detective."\n'
        "2,The Matrix (1999),Sci-Fi|Action,A hacker learns the truth.\n",
    )
    write(
        folder / users_name,
        "id,name,gender,age,traits,status,interest,feature\n"
        '0,Alice Smith,female,30,"curious, calm",nurse,sci-fi;comedy,Watcher;Critic\n'
        "1,Bob Jones,male,41,witty,teacher,action,Explorer\n"
        "2,Carol Diaz,female,25,shy,student,drama,\n",
    )
    if relationships:
        write(folder / "relationship_1000.csv", "user_1,user_2,relationship,intimacy\n0,1,friend,5\n1,2,colleague,2\n")
    write(
        folder / "interactions.csv",
        "user_id,item_id,rating,timestamp\n0,0,5,100\n0,2,4,200\n1,1,,150\n2,2,2,300\n",
    )
    return folder
