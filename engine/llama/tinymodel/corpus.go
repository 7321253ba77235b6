package tinymodel

// corpus is the text the tokenizer's merges are learned from: plain
// English prose, written for this package, with a little of the markup
// chat and tool calls use. The merges follow from its words, so changing
// a single character changes the vocabulary and the token ids of every
// tiny model: don't, unless that is the point.
const corpus = `Hello world. The sea is calm tonight, and the light on the water is soft and grey. We walked down to the harbour after dinner, when the boats were coming in and the gulls were still calling over the stones. My sister said that the sea is never the same twice, and I think she is right: in the morning it was green and loud, and now it is calm and almost silent.

The old town stands on a hill above the harbour. Its streets are narrow and steep, and the houses lean toward each other as if they were sharing a secret. There is a small library near the church, with a blue door and a window full of books. The woman who keeps it knows every reader by name. She will tell you which book to read next, and she is usually right, although she will never say why.

In the summer the town is full of visitors. They come for the beaches and the fish, for the long evenings and the music in the square. In the winter the town is quiet again. The shops close early, the wind comes in from the north, and the people who live here all year sit by the fire and talk about the weather, the boats, the price of bread and the news from the city.

A good question is often more useful than a quick answer. When you ask a question, you should listen to the answer, think about what it means, and then ask the next question. That is how we learn, and that is how we teach. The best teachers I have known were patient people. They did not hurry, and they did not pretend to know what they did not know.

The model reads the text one token at a time. Each token is a small piece of a word: a few letters, a space, a number or a sign. The model looks at the tokens that came before and guesses the next one. It is not thinking the way a person thinks, but it has read a great deal, and its guesses are often good. When it needs a tool, it writes a call: a name and some arguments in JSON, like {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}. The server runs the tool and returns the result, and the model reads the result and writes the answer for the user.

The system message tells the assistant who it is and what it should do. The user asks a question. The assistant answers, or calls a function, and the function returns a response. Then the assistant writes the final answer. This is a simple loop, but it is the heart of every chat with a model.

There are 7 days in a week, 12 months in a year and 365 days in most years. The train leaves at 8 in the morning and comes back at 6 in the evening. If you miss it, you will have to wait for the next one, and the next one is tomorrow.

We should not forget the small things. A kind word, a cup of tea, a letter from an old friend, a walk along the shore when the tide is out and the sand is wet and bright. These are the things that make a day good. I'm sure you'll agree, and I hope we'll meet again soon, when the weather is better and the sea is calm.
Hello again. Hello to the fishermen on the quay, hello to the baker with flour on her hands, hello to the children who run down the hill to school every morning. The whole town says hello, and the whole town knows your name by the end of the week. Say hello to the world, and the world will often say hello back.

The weather changes quickly here. A calm morning can turn into a wild afternoon, with rain across the water and waves breaking over the wall. The fishermen read the sky the way other people read a newspaper. They look at the clouds, the colour of the sea and the direction of the wind, and they decide whether to go out or to stay in the harbour. They are rarely wrong, because they have learned from their fathers and mothers, who learned from theirs.

When I write, I try to keep my sentences short and my words simple. A clear sentence is a gift to the reader. A long sentence, full of clauses and qualifications, asks the reader to do the work that the writer should have done. Read your text aloud. If you run out of breath, the sentence is too long. If you stumble, a word is wrong. If you are bored, the reader will be bored too.

Numbers help us to be precise. The bridge is 240 metres long and 18 metres high. The library has 3,500 books and 40 chairs. The ferry carries 120 people and 30 cars, and it crosses the bay in 45 minutes when the sea is calm. In a storm it does not cross at all, and the people on the other side wait for the morning.

Every function has a name, a description and parameters. The parameters are an object with properties, and each property has a type: a string, a number, a boolean, an array or another object. Some properties are required. The assistant must return the arguments as a valid JSON object, with every required property and no other. If the call fails, the tool returns an error, and the assistant should explain the error to the user and try again.
`
