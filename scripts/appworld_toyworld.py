#!/usr/bin/env python
"""Build a tiny synthetic, fully-offline AppWorld "toy world" (research toward `benchmark=appworld`;
not wired into reme yet: see the AppWorld issue).

Usage (run with the python of the venv where `appworld` is installed AND
`appworld install` has been run, so that appworld.apps.* is unpacked):

    python make_toyworld.py OUT_DIR [--force]

Produces OUT_DIR/data/ with the layout AppWorld 0.1.3.post1 expects:

    data/api_docs/standard/<app>.json        (built from the package's FastAPI apps)
    data/base_dbs/<app>.db                   (empty schema for every app, + toy rows)
    data/tasks/<task_id>/specs.json
    data/tasks/<task_id>/dbs/<app>.jsonl     ("changes" format on top of base_dbs)
    data/tasks/<task_id>/dbs/model_hashes.json
    data/tasks/<task_id>/ground_truth/{metadata,public_data,private_data,test_data}.json
    data/tasks/<task_id>/ground_truth/{answer.json,evaluation.py,solution.py,required_apps.json}
    data/datasets/{train,dev,test_normal,test_challenge}.txt

Then:  APPWORLD_ROOT=OUT_DIR  python -c "from appworld import AppWorld; ..."

Nothing from the real (encrypted/downloaded) AppWorld dataset is used: every
record, task, solution and evaluation here is written by this script.
"""

import json
import os
import shutil
import sys
import time
from textwrap import dedent

# freezegun (started below) replaces time.time/perf_counter/monotonic in EVERY loaded module
# (it scans sys.modules by identity); a default argument is not scanned, so this stays real.
def _clock(_real=time.perf_counter) -> float:
    return _real()


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    out = os.path.abspath(args[0])
    force = "--force" in sys.argv
    data_dir = os.path.join(out, "data")
    if os.path.exists(data_dir):
        if not force:
            sys.exit(f"{data_dir} exists; pass --force to overwrite")
        shutil.rmtree(data_dir)
    os.makedirs(data_dir)

    # APPWORLD_ROOT must be set before appworld's path_store is used.
    os.environ["APPWORLD_ROOT"] = out
    t0 = _clock()

    from appworld.apps import get_all_apps
    from appworld.apps.api_lib import (
        save_local_dbs,
        set_local_date_and_time,
        unset_local_date_and_time,
    )
    from appworld.apps.model_lib import CachedDBHandler, get_db_home_path
    from appworld.collections.api_docs import ApiDocCollection
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import CANARY_STRING, DB_VERSION, DEFAULT_SYSTEM_DATETIME
    from appworld.common.path_store import path_store

    path_store.update_root(out)
    all_apps = get_all_apps()  # includes admin, api_docs, supervisor
    agent_apps = get_all_apps(skip_admin=True)

    freezer = set_local_date_and_time(DEFAULT_SYSTEM_DATETIME)  # 2023-05-18 12:00

    # ------------------------------------------------------------ 1. api docs
    docs = ApiDocCollection.build(load_apps=tuple(agent_apps), include_response_schemas=True)
    # ApiDocCollection.save() mutates (adds canary_string), so keep a clean copy for the DB rows.
    docs_plain = json.loads(json.dumps(docs))
    # NOTE: ApiDocCollection.save() always writes all 3 formats (standard, function_calling,
    # openapi) and the openapi one needs the extra package openapi_spec_validator. AppWorld
    # itself only reads data/api_docs/standard/<app>.json, so write that one directly.
    std_dir = os.path.join(data_dir, "api_docs", "standard")
    os.makedirs(std_dir)
    for app_name, api_name_to_doc in docs_plain.items():
        for doc in api_name_to_doc.values():
            doc["canary_string"] = CANARY_STRING  # ApiDocCollection.load() pops this key
        _write_json(api_name_to_doc, os.path.join(std_dir, app_name + ".json"))
        for doc in api_name_to_doc.values():
            doc.pop("canary_string")
    t_docs = _clock()

    # ------------------------------------------------------------ 2. base dbs
    SUP = dict(
        first_name="Jane",
        last_name="Toy",
        email="jane.toy@example.com",
        phone_number="5550001111",
        birthday="1990-01-01",
    )
    NOTE_PASSWORD = "toy-pass-123"
    build_home = ":memory:toybuild"
    mc = ModelCollection.load(
        to_db_home_path=build_home,
        from_db_home_path=build_home,
        load_apps=all_apps,
        create_db=True,
    )
    # api_docs app serves docs from its own DB table.
    for app_name, api_name_to_doc in docs_plain.items():
        for api_name, doc in api_name_to_doc.items():
            mc.api_docs.ApiDoc.create_save(
                app_name_=app_name,
                api_name=api_name,
                path=doc["path"],
                method=doc["method"],
                description=doc["description"],
                parameters=doc["parameters"],
                response_schemas=doc["response_schemas"],
            )
    mc.admin.MainUser.create_save(**SUP, sex="female")
    note_user = mc.simple_note.User.create_save(
        first_name=SUP["first_name"],
        last_name=SUP["last_name"],
        email=SUP["email"],
        password=NOTE_PASSWORD,
        verified=True,
    )
    seed_notes = [
        ("Shopping list", "bread, butter", ["home"], True),
        ("Book ideas", "A novel about a lighthouse keeper.", ["writing"], False),
        ("Workout plan", "Mon: run 5k; Wed: swim; Fri: yoga", ["health"], False),
    ]
    for title, content, tags, pinned in seed_notes:
        mc.simple_note.Note.create_save(
            user_id=note_user.id, title=title, content=content, tags=tags, pinned=pinned
        )
    base_home = get_db_home_path(storage_type="disk", type="base")  # <root>/data/base_dbs
    save_local_dbs(
        from_db_home_path=build_home,
        to_db_home_path=base_home,
        format="full",
        app_names=list(all_apps),
        delete_if_exists=True,
    )
    mc.close()
    CachedDBHandler.reset()
    t_base = _clock()

    # ------------------------------------------------------------ 3. tasks
    tasks = [
        dict(
            task_id="toy0001_1",
            instruction=(
                "Create a new note in my Simple Note account titled 'Groceries' "
                "with the content 'milk, eggs, coffee'."
            ),
            answer=None,
            private_data={"title": "Groceries", "content": "milk, eggs, coffee"},
            solution=dedent(
                """\
                passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
                profile = apis.supervisor.show_profile()
                token = apis.simple_note.login(username=profile["email"], password=passwords["simple_note"])["access_token"]
                apis.simple_note.create_note(title="Groceries", content="milk, eggs, coffee", access_token=token)
                apis.supervisor.complete_task()
                """
            ),
            evaluation=dedent(
                '''\
                import json


                def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
                    with test(
                        """
                        exactly one note was added and no other note was changed or deleted
                        """
                    ):
                        start_count = models.start.simple_note.Note.count()
                        end_count = models.end.simple_note.Note.count()
                        test.case(end_count, "==", start_count + 1)
                    with test(
                        """
                        a note with the requested title and content exists
                        """
                    ):
                        notes = models.end.simple_note.Note.find_all(title=private_data.title)
                        test.case(len(notes), "==", 1)
                        test.case(notes[0].content.strip(), "==", private_data.content)
                    with test(
                        """
                        the task was marked complete with no answer
                        """
                    ):
                        task = models.end.supervisor.Task.first()
                        test.case(task.status, "==", "success")
                        test.answer(json.loads(task.answer), ground_truth_answer)
                '''
            ),
        ),
        dict(
            task_id="toy0002_1",
            instruction="How many notes do I have in my Simple Note account?",
            answer=3,
            private_data={},
            no_op_pass=["no notes were added, changed or deleted"],
            solution=dedent(
                """\
                passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
                profile = apis.supervisor.show_profile()
                token = apis.simple_note.login(username=profile["email"], password=passwords["simple_note"])["access_token"]
                notes = apis.simple_note.search_notes(access_token=token, page_limit=20)
                apis.supervisor.complete_task(answer=len(notes))
                """
            ),
            evaluation=dedent(
                '''\
                import json


                def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
                    with test(
                        """
                        no notes were added, changed or deleted
                        """
                    ):
                        def snapshot(collection):
                            return sorted(
                                (n.id, n.title, n.content, n.pinned)
                                for n in collection.simple_note.Note.all()
                            )

                        test.case(snapshot(models.end), "==", snapshot(models.start))
                    with test(
                        """
                        the answer is correct
                        """
                    ):
                        task = models.end.supervisor.Task.first()
                        test.answer(json.loads(task.answer), ground_truth_answer)
                '''
            ),
        ),
        dict(
            task_id="toy0003_1",
            instruction="What is the title of my pinned note in Simple Note?",
            answer="Shopping list",
            private_data={},
            solution=dedent(
                """\
                passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
                profile = apis.supervisor.show_profile()
                token = apis.simple_note.login(username=profile["email"], password=passwords["simple_note"])["access_token"]
                notes = apis.simple_note.search_notes(access_token=token, pinned=True)
                apis.supervisor.complete_task(answer=notes[0]["title"])
                """
            ),
            evaluation=dedent(
                '''\
                import json


                def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):
                    with test(
                        """
                        the answer is correct
                        """
                    ):
                        task = models.end.supervisor.Task.first()
                        test.answer(json.loads(task.answer), ground_truth_answer)
                '''
            ),
        ),
    ]
    task_datetime = "2023-05-18T12:00:00"
    for spec in tasks:
        task_id = spec["task_id"]
        task_dir = os.path.join(data_dir, "tasks", task_id)
        os.makedirs(task_dir)
        build = f":memory:toytask-{task_id}"
        tmc = ModelCollection.load(
            to_db_home_path=build, from_db_home_path=base_home, load_apps=all_apps
        )
        sup = tmc.supervisor.Supervisor.create_save(**SUP, sex="female")
        tmc.supervisor.AccountPassword.create_save(
            supervisor_id=sup.id, account_name="simple_note", password=NOTE_PASSWORD
        )
        tmc.supervisor.Task.create_save(supervisor_id=sup.id, instruction=spec["instruction"])
        save_local_dbs(
            from_db_home_path=build,
            to_db_home_path=os.path.join(task_dir, "dbs"),
            format="changes",
            app_names=list(all_apps),
            delete_if_exists=True,
            save_model_hashes=True,
        )
        tmc.close()
        CachedDBHandler.reset()

        specs = {
            "instruction": spec["instruction"],
            "supervisor": {k: SUP[k] for k in ("first_name", "last_name", "email", "phone_number")},
            "datetime": task_datetime,
            "db_version": DB_VERSION,
            "canary_string": CANARY_STRING,
        }
        _write_json(specs, os.path.join(task_dir, "specs.json"))
        gt = os.path.join(task_dir, "ground_truth")
        os.makedirs(gt)
        sol_lines = [l for l in spec["solution"].splitlines() if l.strip()]
        _write_json(
            {
                "mode": "minimal",
                "difficulty": 1,
                "num_apps": 1,
                "num_apis": spec["solution"].count("apis."),
                "num_solution_code_lines": len(sol_lines),
            },
            os.path.join(gt, "metadata.json"),
        )
        _write_json({}, os.path.join(gt, "public_data.json"))
        _write_json(spec["private_data"], os.path.join(gt, "private_data.json"))
        with open(os.path.join(gt, "answer.json"), "w") as f:
            f.write(json.dumps(spec["answer"]))
        with open(os.path.join(gt, "evaluation.py"), "w") as f:
            f.write(spec["evaluation"])
        # Not read by AppWorld in minimal mode; kept for harness tests / oracle runs.
        with open(os.path.join(gt, "solution.py"), "w") as f:
            f.write(spec["solution"])
        _write_json(["simple_note"], os.path.join(gt, "required_apps.json"))
        # test_data: requirement strings must equal dedent(requirement).strip() in evaluation.py
        import re

        reqs = [
            dedent(r).strip()
            for r in re.findall(r'with test\(\s*"""(.*?)"""', spec["evaluation"], flags=re.S)
        ]
        _write_json(
            [
                {
                    "requirement": r,
                    # no_op_pass = a requirement that an agent doing nothing already satisfies.
                    "label": "no_op_pass" if r in spec.get("no_op_pass", []) else "no_op_fail",
                }
                for r in reqs
            ],
            os.path.join(gt, "test_data.json"),
        )

    ds = os.path.join(data_dir, "datasets")
    os.makedirs(ds)
    splits = {
        "train": ["toy0001_1", "toy0002_1"],
        "dev": ["toy0003_1"],
        "test_normal": ["toy0001_1", "toy0002_1", "toy0003_1"],
        "test_challenge": ["toy0003_1"],
    }
    for name, ids in splits.items():
        with open(os.path.join(ds, name + ".txt"), "w") as f:
            f.write("\n".join(ids) + "\n")

    unset_local_date_and_time(freezer)
    t_end = _clock()
    print(
        json.dumps(
            {
                "out": out,
                "seconds_api_docs": round(t_docs - t0, 2),
                "seconds_base_dbs": round(t_base - t_docs, 2),
                "seconds_tasks": round(t_end - t_base, 2),
                "seconds_total": round(t_end - t0, 2),
                "tasks": [t["task_id"] for t in tasks],
            }
        )
    )


def _write_json(obj, path) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


if __name__ == "__main__":
    main()
