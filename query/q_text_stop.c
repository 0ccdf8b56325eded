/*
 * q_text_stop.c -- the stop word lists of MongoDB's text search
 * (src/mongo/db/fts/stop_words_<language>.txt, themselves derived from the
 * Snowball project's lists), one string per language, words separated by
 * spaces, kept as MongoDB ships them (the Russian list included, whose
 * words lost some letters there).
 */
#include <stddef.h>
#include <string.h>

#include "q_text_stop.h"

static const char stop_english[] =
    "a about above after again against all am an and any are aren't as at be because been "
    "before being below between both but by can't cannot could couldn't did didn't do "
    "does doesn't doing don't down during each few for from further had hadn't has hasn't "
    "have haven't having he he'd he'll he's her here here's hers herself him himself his "
    "how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more "
    "most mustn't my myself no nor not of off on once only or other ought our ours "
    "ourselves out over own same shan't she she'd she'll she's should shouldn't so some "
    "such than that that's the their theirs them themselves then there there's these they "
    "they'd they'll they're they've this those through to too under until up very was "
    "wasn't we we'd we'll we're we've were weren't what what's when when's where where's "
    "which while who who's whom why why's with won't would wouldn't you you'd you'll "
    "you're you've your yours yourself yourselves";
static const char stop_french[] =
    "a ai aie aient aies ait alors as au aucun aura aurai auraient aurais aurait auras "
    "aurez auriez aurions aurons auront aussi autre aux avaient avais avait avant avec "
    "avez aviez avions avoir avons ayant ayez ayons bon c car ce ceci cela ces cet cette "
    "ceux chaque ci comme comment d dans de dedans dehors depuis des deux devoir devrait "
    "devrez devriez devrions devrons devront dois doit donc dos droite du dès début dù "
    "elle elles en encore es est et eu eue eues eurent eus eusse eussent eusses eussiez "
    "eussions eut eux eûmes eût eûtes faire fais faisez fait faites fois font force "
    "furent fus fusse fussent fusses fussiez fussions fut fûmes fût fûtes haut hors ici "
    "il ils j je juste l la le les leur leurs lui là m ma maintenant mais me mes moi "
    "moins mon mot même n ne ni nom nommé nommée nommés nos notre nous nouveau nouveaux "
    "on ont ou où par parce parole pas personne personnes peu peut plupart pour pourquoi "
    "qu quand que quel quelle quelles quels qui s sa sans se sera serai seraient serais "
    "serait seras serez seriez serions serons seront ses seulement si sien soi soient "
    "sois soit sommes son sont sous soyez soyons suis sujet sur t ta tandis te tellement "
    "tels tes toi ton tous tout trop très tu un une valeur voient vois voit vont vos "
    "votre vous vu y à ça étaient étais était étant état étiez étions été étés êtes être";
static const char stop_german[] =
    "aber alle allem allen aller alles als also am an ander andere anderem anderen "
    "anderer anderes anderm andern anders auch auf aus bei bin bis bist da damit dann das "
    "dass dasselbe dazu daß dein deine deinem deinen deiner deines dem demselben den denn "
    "denselben der derer derselbe derselben des desselben dessen dich die dies diese "
    "dieselbe dieselben diesem diesen dieser dieses dir doch dort du durch ein eine einem "
    "einen einer eines einig einige einigem einigen einiger einiges einmal er es etwas "
    "euch euer eure eurem euren eurer eures für gegen gewesen hab habe haben hat hatte "
    "hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem ihren ihrer ihres im in "
    "indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann "
    "kein keine keinem keinen keiner keines können könnte machen man manche manchem "
    "manchen mancher manches mein meine meinem meinen meiner meines mich mir mit muss "
    "musste nach nicht nichts noch nun nur ob oder ohne sehr sein seine seinem seinen "
    "seiner seines selbst sich sie sind so solche solchem solchen solcher solches soll "
    "sollte sondern sonst um und uns unse unsem unsen unser unses unter viel vom von vor "
    "war waren warst was weg weil weiter welche welchem welchen welcher welches wenn "
    "werde werden wie wieder will wir wird wirst wo wollen wollte während würde würden zu "
    "zum zur zwar zwischen über";
static const char stop_spanish[] =
    "a al algo algunas algunos ante antes como con contra cual cuando de del desde donde "
    "durante e el ella ellas ellos en entre era erais eran eras eres es esa esas ese eso "
    "esos esta estaba estabais estaban estabas estad estada estadas estado estados "
    "estamos estando estar estaremos estará estarán estarás estaré estaréis estaría "
    "estaríais estaríamos estarían estarías estas este estemos esto estos estoy estuve "
    "estuviera estuvierais estuvieran estuvieras estuvieron estuviese estuvieseis "
    "estuviesen estuvieses estuvimos estuviste estuvisteis estuviéramos estuviésemos "
    "estuvo está estábamos estáis están estás esté estéis estén estés fue fuera fuerais "
    "fueran fueras fueron fuese fueseis fuesen fueses fui fuimos fuiste fuisteis "
    "fuéramos fuésemos ha habida habidas habido habidos habiendo habremos habrá habrán "
    "habrás habré habréis habría habríais habríamos habrían habrías habéis había habíais "
    "habíamos habían habías han has hasta hay haya hayamos hayan hayas hayáis he hemos "
    "hube hubiera hubierais hubieran hubieras hubieron hubiese hubieseis hubiesen "
    "hubieses hubimos hubiste hubisteis hubiéramos hubiésemos hubo la las le les lo los "
    "me mi mis mucho muchos muy más mí mía mías mío míos nada ni no nos nosotras nosotros "
    "nuestra nuestras nuestro nuestros o os otra otras otro otros para pero poco por "
    "porque que quien quienes qué se sea seamos sean seas seremos será serán serás seré "
    "seréis sería seríais seríamos serían serías seáis sido siendo sin sobre sois somos "
    "son soy su sus suya suyas suyo suyos sí también tanto te tendremos tendrá tendrán "
    "tendrás tendré tendréis tendría tendríais tendríamos tendrían tendrías tened tenemos "
    "tenga tengamos tengan tengas tengo tengáis tenida tenidas tenido tenidos teniendo "
    "tenéis tenía teníais teníamos tenían tenías ti tiene tienen tienes todo todos tu tus "
    "tuve tuviera tuvierais tuvieran tuvieras tuvieron tuviese tuvieseis tuviesen "
    "tuvieses tuvimos tuviste tuvisteis tuviéramos tuviésemos tuvo tuya tuyas tuyo tuyos "
    "tú un una uno unos vosotras vosotros vuestra vuestras vuestro vuestros y ya yo él "
    "éramos";
static const char stop_portuguese[] =
    "a ao aos aquela aquelas aquele aqueles aquilo as até com como da das de dela delas "
    "dele deles depois do dos e ela elas ele eles em entre era eram essa essas esse esses "
    "esta estamos estas estava estavam este esteja estejam estejamos estes esteve estive "
    "estivemos estiver estivera estiveram estiverem estivermos estivesse estivessem "
    "estivéramos estivéssemos estou está estávamos estão eu foi fomos for fora foram "
    "forem formos fosse fossem fui fôramos fôssemos haja hajam hajamos havemos hei houve "
    "houvemos houver houvera houveram houverei houverem houveremos houveria houveriam "
    "houvermos houverá houverão houveríamos houvesse houvessem houvéramos houvéssemos há "
    "hão isso isto já lhe lhes mais mas me mesmo meu meus minha minhas muito na nas nem "
    "no nos nossa nossas nosso nossos num numa não nós o os ou para pela pelas pelo pelos "
    "por qual quando que quem se seja sejam sejamos sem serei seremos seria seriam será "
    "serão seríamos seu seus somos sou sua suas são só também te tem temos tenha tenham "
    "tenhamos tenho terei teremos teria teriam terá terão teríamos teu teus teve tinha "
    "tinham tive tivemos tiver tivera tiveram tiverem tivermos tivesse tivessem "
    "tivéramos tivéssemos tu tua tuas tém tínhamos um uma você vocês vos à às éramos";
static const char stop_italian[] =
    "a abbia abbiamo abbiano abbiate ad agl agli ai al all alla alle allo anche avemmo "
    "avendo avesse avessero avessi avessimo aveste avesti avete aveva avevamo avevano "
    "avevate avevi avevo avrai avranno avrebbe avrebbero avrei avremmo avremo avreste "
    "avresti avrete avrà avrò avuta avute avuti avuto c che chi ci coi col come con "
    "contro cui da dagl dagli dai dal dall dalla dalle dallo degl degli dei del dell "
    "della delle dello di dov dove e ebbe ebbero ebbi ed era erano eravamo eravate eri "
    "ero essendo faccia facciamo facciano facciate faccio facemmo facendo facesse "
    "facessero facessi facessimo faceste facesti faceva facevamo facevano facevate facevi "
    "facevo fai fanno farai faranno farebbe farebbero farei faremmo faremo fareste "
    "faresti farete farà farò fece fecero feci fosse fossero fossi fossimo foste fosti fu "
    "fui fummo furono gli ha hai hanno ho i il in io l la le lei li lo loro lui ma mi mia "
    "mie miei mio ne negl negli nei nel nell nella nelle nello noi non nostra nostre "
    "nostri nostro o per perché più quale quanta quante quanti quanto quella quelle "
    "quelli quello questa queste questi questo sarai saranno sarebbe sarebbero sarei "
    "saremmo saremo sareste saresti sarete sarà sarò se sei si sia siamo siano siate "
    "siete sono sta stai stando stanno starai staranno starebbe starebbero starei "
    "staremmo staremo stareste staresti starete starà starò stava stavamo stavano stavate "
    "stavi stavo stemmo stesse stessero stessi stessimo steste stesti stette stettero "
    "stetti stia stiamo stiano stiate sto su sua sue sugl sugli sui sul sull sulla sulle "
    "sullo suo suoi ti tra tu tua tue tuo tuoi tutti tutto un una uno vi voi vostra "
    "vostre vostri vostro è";
static const char stop_dutch[] =
    "aan al alles als altijd andere ben bij daar dan dat de der deze die dit doch doen "
    "door dus een eens en er ge geen geweest haar had heb hebben heeft hem het hier hij "
    "hoe hun iemand iets ik in is ja je kan kon kunnen maar me meer men met mij mijn moet "
    "na naar niet niets nog nu of om omdat onder ons ook op over reeds te tegen toch toen "
    "tot u uit uw van veel voor want waren was wat werd wezen wie wil worden wordt zal ze "
    "zelf zich zij zijn zo zonder zou";
static const char stop_russian[] =
    "а без более больше будет будто бы был была были было быть в вам вас вдруг ведь во "
    "вот вроем все всегда всего всех всю вы где говорил да даже два для до другой его "
    "ее ей еловек ем ему еред ерез если есть ж же жизнь за заем здесь и из или им "
    "иногда их к кажется как какая какой когда конено кто куда ли луше между меня мне "
    "много может можно мой моя мы на над надо наконец нас не него нее ней нельзя нет ни "
    "нибудь ниего никогда ним них но ну о об од один он она они осле от оти отом "
    "отому оять раз разве ри ро с сам свою себе себя сегодня сейас сказал сказала "
    "сказать со совсем так такой там тебя теерь тем то тоб тобы тогда того тоже "
    "только том тот три тут ты у уж уже уть хорошо хоть эти этого этой этом этот эту я";

const char *q_text_stop_words(const char *lang)
{
    if (!strcmp(lang, "english"))
        return stop_english;
    if (!strcmp(lang, "french"))
        return stop_french;
    if (!strcmp(lang, "german"))
        return stop_german;
    if (!strcmp(lang, "spanish"))
        return stop_spanish;
    if (!strcmp(lang, "portuguese"))
        return stop_portuguese;
    if (!strcmp(lang, "italian"))
        return stop_italian;
    if (!strcmp(lang, "dutch"))
        return stop_dutch;
    if (!strcmp(lang, "russian"))
        return stop_russian;
    return NULL;
}
