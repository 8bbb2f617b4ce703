"""Every EC2 instance type, by family: the ``InstanceType`` enum of the EC2 API model that
botocore ships (``botocore/data/ec2/2016-11-15/service-2.json``, botocore 1.44.8, the version
``requirements.txt`` pins). ``tests/unit/test_ec2_instance_types.py`` compares this table with the
installed botocore's; ``python -m ml_platform.ec2_instance_types`` prints it anew from botocore.

Data only, no imports: the settings check instance types without boto3 or aws-cdk-lib.
"""

from __future__ import annotations

__all__ = [
    "FAMILIES",
    "SOURCE",
    "instance_type_problem",
]

#: Source of the table (see the module docstring).
SOURCE = "botocore 1.44.8, ec2 2016-11-15 service model, shape InstanceType"

#: Sizes of each instance family, space-separated, in the model's order.
FAMILIES: dict[str, str] = {
    "a1": "medium large xlarge 2xlarge 4xlarge metal",
    "c1": "medium xlarge",
    "c3": "large xlarge 2xlarge 4xlarge 8xlarge",
    "c4": "large xlarge 2xlarge 4xlarge 8xlarge",
    "c5": "large xlarge 2xlarge 4xlarge 9xlarge 12xlarge 18xlarge 24xlarge metal",
    "c5a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "c5ad": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "c5d": "large xlarge 2xlarge 4xlarge 9xlarge 12xlarge 18xlarge 24xlarge metal",
    "c5n": "large xlarge 2xlarge 4xlarge 9xlarge 18xlarge metal",
    "c6a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal",
    "c6g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "c6gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "c6gn": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "c6id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "c6in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "c7a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal-48xl",
    "c7g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "c7gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "c7gn": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "c7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "c7i-flex": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c8a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "c8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "c8gb": "12xlarge 16xlarge 24xlarge 2xlarge 4xlarge 8xlarge large medium metal-24xl xlarge 48xlarge metal-48xl",
    "c8gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "c8gn": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "c8i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "c8i-flex": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "c8ib": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "c8id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "c8in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "c8ine": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge",
    "c9g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-48xl",
    "c9gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-48xl",
    "cc1": "4xlarge",
    "cc2": "8xlarge",
    "cg1": "4xlarge",
    "cr1": "8xlarge",
    "d2": "xlarge 2xlarge 4xlarge 8xlarge",
    "d3": "xlarge 2xlarge 4xlarge 8xlarge",
    "d3en": "xlarge 2xlarge 4xlarge 6xlarge 8xlarge 12xlarge",
    "dl1": "24xlarge",
    "dl2q": "24xlarge",
    "f1": "2xlarge 4xlarge 16xlarge",
    "f2": "12xlarge 48xlarge 6xlarge",
    "g2": "2xlarge 8xlarge",
    "g3": "4xlarge 8xlarge 16xlarge",
    "g3s": "xlarge",
    "g4ad": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge",
    "g4dn": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "g5": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "g5g": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge metal",
    "g6": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "g6e": "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge",
    "g6f": "large xlarge 2xlarge 4xlarge",
    "g7": "2xlarge 4xlarge 8xlarge 12xlarge 24xlarge 48xlarge",
    "g7e": "2xlarge 4xlarge 8xlarge 12xlarge 24xlarge 48xlarge",
    "gr6": "4xlarge 8xlarge",
    "gr6f": "4xlarge",
    "h1": "2xlarge 4xlarge 8xlarge 16xlarge",
    "hi1": "4xlarge",
    "hpc6a": "48xlarge",
    "hpc6id": "32xlarge",
    "hpc7a": "12xlarge 24xlarge 48xlarge 96xlarge",
    "hpc7g": "4xlarge 8xlarge 16xlarge",
    "hpc8a": "96xlarge",
    "hs1": "8xlarge",
    "i2": "xlarge 2xlarge 4xlarge 8xlarge",
    "i3": "large xlarge 2xlarge 4xlarge 8xlarge 16xlarge metal",
    "i3en": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge 24xlarge metal",
    "i4g": "large xlarge 2xlarge 4xlarge 8xlarge 16xlarge",
    "i4i": "large xlarge 2xlarge 4xlarge 8xlarge 16xlarge 32xlarge metal 12xlarge 24xlarge",
    "i7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "i7ie": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge 18xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "i8g": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal-24xl 48xlarge metal-48xl",
    "i8ge": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge 18xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "im4gn": "large xlarge 2xlarge 4xlarge 8xlarge 16xlarge",
    "inf1": "xlarge 2xlarge 6xlarge 24xlarge",
    "inf2": "xlarge 8xlarge 24xlarge 48xlarge",
    "is4gen": "medium large xlarge 2xlarge 4xlarge 8xlarge",
    "m1": "small medium large xlarge",
    "m2": "xlarge 2xlarge 4xlarge",
    "m3": "medium large xlarge 2xlarge",
    "m4": "large xlarge 2xlarge 4xlarge 10xlarge 16xlarge",
    "m5": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "m5a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "m5ad": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "m5d": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "m5dn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "m5n": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "m5zn": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge metal",
    "m6a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal",
    "m6g": "metal medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m6gd": "metal medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "m6id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "m6idn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "m6in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "m7a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal-48xl",
    "m7g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "m7gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "m7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "m7i-flex": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m8a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "m8azn": "medium large xlarge 3xlarge 6xlarge 12xlarge 24xlarge metal-12xl metal-24xl",
    "m8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "m8gb": "12xlarge 16xlarge 24xlarge 2xlarge 4xlarge 8xlarge large medium xlarge 48xlarge metal-24xl metal-48xl",
    "m8gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "m8gn": "12xlarge 16xlarge 24xlarge 2xlarge 48xlarge 4xlarge 8xlarge large medium xlarge metal-24xl metal-48xl",
    "m8i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8i-flex": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "m8ib": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8idb": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8idn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "m8ine": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge",
    "m9g": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl medium",
    "m9gd": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl medium",
    "mac-m3ultra": "metal",
    "mac-m4": "metal",
    "mac-m4max": "metal",
    "mac-m4pro": "metal",
    "mac1": "metal",
    "mac2": "metal",
    "mac2-m1ultra": "metal",
    "mac2-m2": "metal",
    "mac2-m2pro": "metal",
    "p2": "xlarge 8xlarge 16xlarge",
    "p3": "2xlarge 8xlarge 16xlarge",
    "p3dn": "24xlarge",
    "p4d": "24xlarge",
    "p4de": "24xlarge",
    "p5": "48xlarge 4xlarge",
    "p5e": "48xlarge",
    "p5en": "48xlarge",
    "p6-b200": "48xlarge",
    "p6-b300": "48xlarge",
    "p6e-gb200": "36xlarge",
    "r3": "large xlarge 2xlarge 4xlarge 8xlarge",
    "r4": "large xlarge 2xlarge 4xlarge 8xlarge 16xlarge",
    "r5": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "r5a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "r5ad": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge",
    "r5b": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "r5d": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "r5dn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "r5n": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal",
    "r6a": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal",
    "r6g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "r6gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "r6i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "r6id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "r6idn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "r6in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge metal",
    "r7a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge metal-48xl",
    "r7g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "r7gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "r7i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "r7iz": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 32xlarge metal-16xl metal-32xl",
    "r8a": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "r8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "r8gb": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge metal-24xl 48xlarge metal-48xl",
    "r8gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "r8gn": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "r8i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r8i-flex": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge",
    "r8ib": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r8id": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r8idb": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r8idn": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r8in": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 96xlarge metal-48xl metal-96xl",
    "r9g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-48xl",
    "r9gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-48xl",
    "t1": "micro",
    "t2": "nano micro small medium large xlarge 2xlarge",
    "t3": "nano micro small medium large xlarge 2xlarge",
    "t3a": "nano micro small medium large xlarge 2xlarge",
    "t4g": "nano micro small medium large xlarge 2xlarge",
    "t8i": "nano micro small medium",
    "trn1": "2xlarge 32xlarge",
    "trn1n": "32xlarge",
    "trn2": "48xlarge 3xlarge",
    "trn2u": "48xlarge",
    "u-12tb1": "112xlarge metal",
    "u-18tb1": "metal 112xlarge",
    "u-24tb1": "metal 112xlarge",
    "u-3tb1": "56xlarge",
    "u-6tb1": "56xlarge 112xlarge metal",
    "u-9tb1": "112xlarge metal",
    "u7i-12tb": "224xlarge",
    "u7i-6tb": "112xlarge",
    "u7i-8tb": "112xlarge",
    "u7ib-12tb": "224xlarge",
    "u7in-16tb": "224xlarge",
    "u7in-24tb": "224xlarge",
    "u7in-32tb": "224xlarge",
    "u7inh-32tb": "480xlarge",
    "vt1": "3xlarge 6xlarge 24xlarge",
    "x1": "16xlarge 32xlarge",
    "x1e": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge 32xlarge",
    "x2gd": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge metal",
    "x2idn": "16xlarge 24xlarge 32xlarge metal",
    "x2iedn": "xlarge 2xlarge 4xlarge 8xlarge 16xlarge 24xlarge 32xlarge metal",
    "x2iezn": "2xlarge 4xlarge 6xlarge 8xlarge 12xlarge metal",
    "x8aedz": "12xlarge 24xlarge 3xlarge 6xlarge large metal-12xl metal-24xl xlarge",
    "x8g": "medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge metal-24xl metal-48xl",
    "x8i": "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge 48xlarge 64xlarge 96xlarge metal-48xl metal-96xl",
    "z1d": "large xlarge 2xlarge 3xlarge 6xlarge 12xlarge metal",
}


def instance_type_problem(name: str) -> str | None:
    """Why ``name`` is not an EC2 instance type (``None`` when it is one), naming the sizes of
    its family or, for an unknown family, some families with the same letters."""
    family, _, size = name.partition(".")
    if family not in FAMILIES:
        similar = sorted(f for f in FAMILIES if f[:1] == family[:1])[:8]
        hint = (
            f" (families starting with {family[:1]!r}: {', '.join(similar)}, ...)"
            if similar
            else ""
        )
        return f"no EC2 instance family {family[:40]!r}{hint}"
    sizes = FAMILIES[family].split()
    if size not in sizes:
        return f"{family} comes in {', '.join(sizes)}"
    return None


def _print_from_botocore() -> None:  # pragma: no cover (a maintainer's tool)
    import botocore.session

    shape = botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType")
    families: dict[str, list[str]] = {}
    for name in shape.enum:
        family, _, size = name.partition(".")
        families.setdefault(family, []).append(size)
    for family in sorted(families):
        print(f'    "{family}": "{" ".join(families[family])}",')


if __name__ == "__main__":  # pragma: no cover
    _print_from_botocore()
