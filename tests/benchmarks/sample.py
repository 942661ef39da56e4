"""A tiny conversation in LoCoMo's format, made here: the real data never enters the test suite."""

SAMPLE = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I'm adopting a rescue dog named Pixel next week!"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "That's amazing, Ana. What breed is Pixel?"},
            {
                "speaker": "Ana",
                "dia_id": "D1:3",
                "text": "Pixel is a border collie, so she needs long walks.",
            },
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "How is the pottery class going?"},
            {
                "speaker": "Ana",
                "dia_id": "D2:2",
                "text": "Really great, I just made my first bowl.",
                "blip_caption": "a photo of a blue bowl",
            },
            {"speaker": "Ben", "dia_id": "D2:3", "text": "I started learning the violin in March."},
        ],
    },
    "qa": [
        {
            "question": "What breed is Ana's dog?",
            "answer": "border collie",
            "evidence": ["D1:3"],
            "category": 4,
        },
        {"question": "What did Ana make in pottery class?", "evidence": ["D2:2; D9:9"], "category": 1},
        {"question": "What instrument does Ben play?", "evidence": ["D:2:3"], "category": 4},
        {"question": "What did Ben say about cats?", "evidence": [], "category": 5},
    ],
}
