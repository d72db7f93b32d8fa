Y á toda bestia de la tierra, y á todas las aves de los cielos, y á todo lo que se mueve sobre la tierra, en que hay vida, toda hierba verde les será para comer: y fué así.
Entonces la serpiente dijo á la mujer: No moriréis;
Y él le dijo: ¿Qué has hecho? La voz de la sangre de tu hermano clama á mí desde la tierra.
Y vivió Mahalaleel sesenta y cinco años, y engendró á Jared.
Y dijo Dios á Noé: El fin de toda carne ha venido delante de mí; porque la tierra está llena de violencia á causa de ellos; y he aquí que yo los destruiré con la tierra.
Y murió toda carne que se mueve sobre la tierra, así de aves como de ganados, y de bestias, y de todo reptil que anda arrastrando sobre la tierra, y todo hombre:
El que derramare sangre del hombre, por el hombre su sangre será derramada; porque á imagen de Dios es hecho el hombre.
Y los hijos de Cush: Seba, Havila, y Sabta, y Raama, y Sabtecha. Y los hijos de Raama: Sheba y Dedán.
Y descendió Jehová para ver la ciudad y la torre que edificaban los hijos de los hombres.
Y fuése Abram, como Jehová le dijo; y fué con él Lot: y era Abram de edad de setenta y cinco años cuando salió de Harán.
Y Jehová dijo á Abram, después que Lot se apartó de él: Alza ahora tus ojos, y mira desde el lugar donde estás hacia el Aquilón, y al Mediodía, y al Oriente y al Occidente;
Y respondió Abram: Señor Jehová ¿qué me has de dar, siendo así que ando sin hijo, y el mayordomo de mi casa es ese Damasceno Eliezer?
Díjole aún el ángel de Jehová: He aquí que has concebido, y parirás un hijo, y llamarás su nombre Ismael, porque oído ha Jehová tu aflicción.
En el mismo día fué circuncidado Abraham é Ismael su hijo.
Y volvió á hablarle, y dijo: Quizá se hallarán allí cuarenta. Y respondió: No lo haré por amor de los cuarenta.
Entonces la mujer de Lot miró atrás, á espaldas de él, y se volvió estatua de sal.
Y VISITÓ Jehová á Sara, como había dicho, é hizo Jehová con Sara como había hablado.
Por esto llamó á aquel lugar Beer-seba; porque allí juraron ambos.
Y levantóse Abraham de delante de su muerto, y habló á los hijos de Heth, diciendo:
Sea, pues, que la moza á quien yo dijere: Baja tu cántaro, te ruego, para que yo beba; y ella respondiere: Bebe, y también daré de beber á tus camellos: que sea ésta la que tú has destinado para tu siervo Isaac; y en esto conoceré que habrás hecho misericordia con mi señor.
Y ella me respondiere, Bebe tú, y también para tus camellos sacaré agua: ésta sea la mujer que destinó Jehová para el hijo de mi señor.
Y estos fueron los días de vida que vivió Abraham: ciento setenta y cinco años.
Habita en esta tierra, y seré contigo, y te bendeciré; porque á ti y á tu simiente daré todas estas tierras, y confirmaré el juramento que juré á Abraham tu padre:
Y cuando Esaú fué de cuarenta años, tomó por mujer á Judith hija de Beeri Hetheo, y á Basemat hija de Elón Hetheo:
Sírvante pueblos, y naciones se inclinen á ti: sé señor de tus hermanos, e inclínense á ti los hijos de tu madre: malditos los que te maldijeren, y benditos los que te bendijeren.
Y he aquí, Jehová estaba en lo alto de ella, el cual dijo: Yo soy Jehová, el Dios de Abraham tu padre, y el Dios de Isaac: la tierra en que estás acostado te la daré á ti y á tu simiente.
Entonces Labán juntó á todos los varones de aquel lugar, é hizo banquete.
Y oyó Dios á Lea: y concibió, y parió á Jacob el quinto hijo.
Y envió Jacob, y llamó á Rachêl y á Lea al campo á sus ovejas,
Y ella dijo á su padre: No se enoje mi señor, porque no me puedo levantar delante de ti; pues estoy con la costumbre de las mujeres. Y él buscó, pero no halló los ídolos.
Menor soy que todas las misericordias, y que toda la verdad que has usado para con tu siervo; que con mi bordón pasé este Jordán, y ahora estoy sobre dos cuadrillas.
Y él dijo: ¿Qué te propones con todas estas cuadrillas que he encontrado? Y él respondió: El hallar gracia en los ojos de mi señor.
Y parecieron bien sus palabras á Hamor y á Sichêm, hijo de Hamor.
Y acaeció que al salírsele el alma, (pues murió) llamó su nombre Benoni; mas su padre lo llamó Benjamín.
Estos, pues, son los hijos de Esaú, y sus duques: él es Edom.
Y él les dijo: Oíd ahora este sueño que he soñado:
Y ACONTECIÓ en aquel tiempo, que Judá descendió de con sus hermanos, y fuése á un varón Adullamita, que se llamaba Hira.
Y LLEVADO José á Egipto, comprólo Potiphar, eunuco de Faraón, capitán de los de la guardia, varón Egipcio, de mano de los Ismaelitas que lo habían llevado allá.
Y ellos le dijeron: Hemos tenido un sueño, y no hay quien lo declare. Entonces les dijo José: ¿No son de Dios las declaraciones? Contádmelo ahora.
Y respondió José á Faraón, diciendo: No está en mí; Dios será el que responda paz á Faraón.
Y era José de edad de treinta años cuando fué presentado delante de Faraón, rey de Egipto: y salió José de delante de Faraón, y transitó por toda la tierra de Egipto.
Si sois hombres de verdad, quede preso en la casa de vuestra cárcel uno de vuestros hermanos; y vosotros id, llevad el alimento para el hambre de vuestra casa:
Y tomad en vuestras manos doblado dinero, y llevad en vuestra mano el dinero vuelto en las bocas de vuestros costales; quizá fué yerro.
He aquí, el dinero que hallamos en la boca de nuestros costales, te lo volvimos á traer desde la tierra de Canaán; ¿cómo, pues, habíamos de hurtar de casa de tu señor plata ni oro?
Entonces dijo José á sus hermanos: Llegaos ahora á mí. Y ellos se llegaron. Y él dijo: Yo soy José vuestro hermano el que vendisteis para Egipto.
Y tomaron sus ganados, y su hacienda que había adquirido en la tierra de Canaán, y viniéronse á Egipto, Jacob, y toda su simiente consigo;
Y Faraón dijo á sus hermanos: ¿Cuál es vuestro oficio? Y ellos respondieron á Faraón: Pastores de ovejas son tus siervos, así nosotros como nuestros padres.
Y se hizo saber á Jacob, diciendo: He aquí tu hijo José viene á ti. Entonces se esforzó Israel, y sentóse sobre la cama;
No será quitado el cetro de Judá, y el legislador de entre sus piés, hasta que venga Shiloh; y á él se congregarán los pueblos.
Y toda la casa de José, y sus hermanos, y la casa de su padre: solamente dejaron en la tierra de Gosén sus niños, y sus ovejas y sus vacas.
Empero cuanto más los oprimían, tanto más se multiplicaban y crecían: así que estaban ellos fastidiados de los hijos de Israel.
Y dijo á sus hijas: ¿Y dónde está? ¿por qué habéis dejado ese hombre? llamadle para que coma pan.
Entonces dijo Jehová á Moisés: Extiende tu mano, y tómala por la cola. Y él extendió su mano, y tomóla, y tornóse vara en su mano.
Y ellos dijeron: El Dios de los Hebreos nos ha encontrado: iremos, pues, ahora camino de tres días por el desierto, y sacrificaremos á Jehová nuestro Dios; porque no venga sobre nosotros con pestilencia ó con espada.
Y habló Jehová á Moisés, diciendo:
Vinieron, pues, Moisés y Aarón á Faraón, é hicieron como Jehová lo había mandado: y echó Aarón su vara delante de Faraón y de sus siervos, y tornóse culebra.
Entonces Jehová dijo á Moisés: Di á Aarón: Extiende tu vara, y hiere el polvo de la tierra, para que se vuelva piojos por todo el país de Egipto.
Porque yo enviaré esta vez todas mis plagas á tu corazón, sobre tus siervos, y sobre tu pueblo, para que entiendas que no hay otro como yo en toda la tierra.
Y Moisés respondió: Hemos de ir con nuestros niños y con nuestros viejos, con nuestros hijos y con nuestras hijas: con nuestras ovejas y con nuestras vacas hemos de ir; porque tenemos solemnidad de Jehová.
Y HABLÓ Jehová á Moisés y á Aarón en la tierra de Egipto, diciendo:
E hizo llamar á Moisés y á Aarón de noche, y díjoles: Salid de en medio de mi pueblo vosotros, y los hijos de Israel; é id, servid á Jehová, como habéis dicho.
Por tanto, tú guardarás este rito en su tiempo de año en año.
Y el ángel de Dios que iba delante del campo de Israel, se apartó, é iba en pos de ellos; y asimismo la columna de nube que iba delante de ellos, se apartó, y púsose á sus espaldas:
Jehová reinará por los siglos de los siglos.
Y recogíanlo cada mañana, cada uno según lo que había de comer: y luego que el sol calentaba, derretíase.
Y Moisés edificó un altar, y llamó su nombre Jehová-nissi;
Y Moisés subió á Dios; y Jehová lo llamó desde el monte, diciendo: Así dirás á la casa de Jacob, y denunciarás á los hijos de Israel:
Acordarte has del día del reposo, para santificarlo:
El que hiriere á alguno, haciéndole así morir, él morirá.
Cuando alguno diere á su prójimo plata ó alhajas á guardar, y fuere hurtado de la casa de aquel hombre, si el ladrón se hallare, pagará el doble.
No pervertirás el derecho de tu mendigo en su pleito.
Y Moisés vino y contó al pueblo todas las palabras de Jehová, y todos los derechos: y todo el pueblo respondió á una voz, y dijeron: Ejecutaremos todas las palabras que Jehová ha dicho.
Y pondrás en el arca el testimonio que yo te daré.
Harás también cincuenta corchetes de oro, con los cuales juntarás las cortinas la una con la otra, y se formará un tabernáculo.
Y harás á la puerta del tabernáculo una cortina de cárdeno, y púrpura, y carmesí, y lino torcido, obra de bordador.
Y tomarás dos piedras oniquinas, y grabarás en ellas los nombres de los hijos de Israel:
Y bordarás una túnica de lino, y harás una mitra de lino; harás también un cinto de obra de recamador.
Y tomarás el pecho del carnero de las consagraciones, que fué inmolado para la de Aarón, y lo mecerás por ofrenda agitada delante de Jehová; y será porción tuya.
Y sobre sus cuernos hará Aarón expiación una vez en el año con la sangre de la expiación para las reconciliaciones: una vez en el año hará expiación sobre él en vuestras edades: será muy santo á Jehová.
Y lo he henchido de espíritu de Dios, en sabiduría, y en inteligencia, y en ciencia, y en todo artificio,
Y volvióse Moisés, y descendió del monte trayendo en su mano las dos tablas del testimonio, las tablas escritas por ambos lados; de una parte y de otra estaban escritas.
Y viendo todo el pueblo la columna de la nube, que estaba á la puerta del tabernáculo, levantábase todo el pueblo, cada uno á la puerta de su tienda, y adoraba.
La fiesta de los ázimos guardarás: siete días comerás por leudar, según te he mandado, en el tiempo del mes de Abib; porque en el mes de Abib saliste de Egipto.
La mesa, y sus varas, y todos sus vasos, y el pan de la proposición.
Y todos los sabios de corazón entre los que hacían la obra, hicieron el tabernáculo de diez cortinas, de lino torcido, y de jacinto, y de púrpura y carmesí; las cuales hicieron de obra prima, con querubines.
HIZO también Bezaleel el arca de madera de Sittim: su longitud era de dos codos y medio, y de codo y medio su anchura, y su altura de otro codo y medio:
E hízole sus cuernos á sus cuatro esquinas, los cuales eran de la misma pieza, y cubriólo de metal.
Y DEL jacinto, y púrpura, y carmesí, hicieron las vestimentas del ministerio para ministrar en el santuario, y asimismo hicieron las vestiduras sagradas para Aarón; como Jehová lo había mandado á Moisés.
Y pusieron en ella un cordón de jacinto, para colocarla en alto sobre la mitra; como Jehová lo había mandado á Moisés.
Y extendió la tienda sobre el tabernáculo, y puso la sobrecubierta encima del mismo; como Jehová había mandado á Moisés.
Y ha de degollarlo al lado septentrional del altar delante de Jehová: y los sacerdotes, hijos de Aarón, rociarán su sangre sobre el altar alrededor.
Y pondrá su mano sobre la cabeza de su ofrenda, y después la degollará delante del tabernáculo del testimonio; y los hijos de Aarón rociarán su sangre sobre el altar en derredor.
Y cuando pecare el príncipe, é hiciere por yerro algo contra alguno de todos los mandamientos de Jehová su Dios, sobre cosas que no se han de hacer, y pecare;
Finalmente, si una persona pecare, ó hiciere alguna de todas aquellas cosas que por mandamiento de Jehová no se han de hacer, aun sin hacerlo á sabiendas, es culpable, y llevará su pecado.
Y la vasija de barro en que fuere cocida, será quebrada: y si fuere cocida en vasija de metal, será fregada y lavada con agua.
Habla á los hijos de Israel, diciendo: El que ofreciere sacrificio de sus paces á Jehová, traerá su ofrenda del sacrificio de sus paces á Jehová;
Lavó luego con agua los intestinos y piernas, y quemó Moisés todo el carnero sobre el altar: holocausto en olor de suavidad, ofrenda encendida á Jehová; como lo había Jehová mandado á Moisés.
Ofreció también la ofrenda del pueblo, y tomó el macho cabrío que era para la expiación del pueblo, y degollólo, y lo ofreció por el pecado como el primero.
Y HABLÓ Jehová á Moisés y á Aarón, diciéndoles:
Y todo aquello sobre que cayere alguno de ellos después de muertos, será inmundo; así vaso de madera, como vestido, ó piel, ó saco, cualquier instrumento con que se hace obra, será metido en agua, y será inmundo hasta la tarde, y así será limpio.
Mas si hubiere ido creciendo la postilla en la piel, después que fué mostrado al sacerdote para ser limpio, será visto otra vez del sacerdote:
Mas si le pareciere que la tiña está detenida, y que ha salido en ella el pelo negro, la tiña está sanada; él está limpio, y por limpio lo dará el sacerdote.
Y será, que al séptimo día raerá todos sus pelos, su cabeza, y su barba, y las cejas de sus ojos; finalmente, raerá todo su pelo, y lavará sus vestidos, y lavará su carne en aguas, y será limpio.
Y al séptimo día volverá el sacerdote, y mirará: y si la plaga hubiere crecido en las paredes de la casa,
Y la vasija de barro en que tocare el que tiene flujo, será quebrada; y toda vasija de madera será lavada con agua.
Mas el macho cabrío, sobre el cual cayere la suerte por Azazel, lo presentará vivo delante de Jehová, para hacer la reconciliación sobre él, para enviarlo á Azazel al desierto.
Y el sacerdote esparcirá la sangre sobre el altar de Jehová, á la puerta del tabernáculo del testimonio, y quemará el sebo en olor de suavidad á Jehová.
Además, no tendrás acto carnal con la mujer de tu prójimo, contaminándote en ella.
Y él traerá á Jehová, á la puerta del tabernáculo del testimonio, un carnero en expiación por su culpa.
Y el que tomare mujer y á la madre de ella, comete vileza: quemarán en fuego á él y á ellas, porque no haya vileza entre vosotros.
Habla á Aarón, y dile: El varón de tu simiente en sus generaciones, en el cual hubiere falta, no se allegará para ofrecer el pan de su Dios.
Buey ó carnero que tenga de más ó de menos, podrás ofrecer por ofrenda voluntaria; mas por voto no será acepto.
Y convocaréis en este mismo día; os será santa convocación: ninguna obra servil haréis: estatuto perpetuo en todas vuestras habitaciones por vuestras edades.
Pondrás también sobre cada orden incienso limpio, y será para el pan por perfume, ofrenda encendida á Jehová.
Y cuando vendiereis algo á vuestro prójimo, ó comprareis de mano de vuestro prójimo, no engañe ninguno á su hermano:
También compraréis de los hijos de los forasteros que viven entre vosotros, y de los que del linaje de ellos son nacidos en vuestra tierra, que están con vosotros; los cuales tendréis por posesión:
Y vuestra fuerza se consumirá en vano; que vuestra tierra no dará su esquilmo, y los árboles de la tierra no darán su fruto.
Y si fuere hembra, la estimación será treinta siclos.
Y HABLÓ Jehová á Moisés en el desierto de Sinaí, en el tabernáculo del testimonio, en el primero del mes segundo, en el segundo año de su salida de la tierra de Egipto, diciendo:
Los contados de ellos, de la tribu de Zabulón, cincuenta y siete mil y cuatrocientos.
Y la tribu de Zabulón: y el jefe de los hijos de Zabulón, Eliab hijo de Helón;
Estos son los nombres de los hijos de Aarón, sacerdotes ungidos; cuyas manos él hinchió para administrar el sacerdocio.
Y los contados de ellos conforme á la cuenta de todos los varones de un mes arriba, fueron seis mil y doscientos.
Y quitarán la ceniza del altar, y extenderán sobre él un paño de púrpura:
Desde el de edad de treinta años arriba hasta el de edad de cincuenta años, todos los que entran en compañía, para ministrar en el tabernáculo del testimonio:
Después tomará el sacerdote de la mano de la mujer el presente de los celos, y mecerálo delante de Jehová, y lo ofrecerá delante del altar:
Jehová te bendiga, y te guarde:
Un becerro, un carnero, un cordero de un año para holocausto;
Un macho cabrío para expiación;
Y todos los bueyes del sacrificio de las paces veinte y cuatro novillos, sesenta los carneros, sesenta los machos de cabrío, sesenta los corderos de un año. Esta fué la dedicación del altar, después que fué ungido.
El décimocuarto día de este mes, entre las dos tardes, la haréis á su tiempo: conforme á todos sus ritos, y conforme á todas sus leyes la haréis.
Y en el día de vuestra alegría, y en vuestras solemnidades, y en los principios de vuestros meses, tocaréis las trompetas sobre vuestros holocaustos, y sobre los sacrificios de vuestras paces, y os serán por memoria delante de vuestro Dios: Yo Jehová vuestro Dios.
Nos acordamos del pescado que comíamos en Egipto de balde, de los cohombros, y de los melones, y de los puerros, y de las cebollas, y de los ajos:
De Kibroth-hattaavah movió el pueblo á Haseroth, y pararon en Haseroth.
Y que has hecho morir á este pueblo como á un hombre: y las gentes que hubieren oído tu fama hablarán, diciendo:
Y JEHOVÁ habló á Moisés, diciendo:
Por cuanto tuvo en poco la palabra de Jehová, y dió por nulo su mandamiento, enteramente será cortada la tal persona: su iniquidad será sobre ella.
Y Jehová habló á Moisés y á Aarón, diciendo:
Y HABLÓ Jehová á Moisés, diciendo:
Y la carne de ellos será tuya: como el pecho de la mecedura y como la espaldilla derecha, será tuya.
Y cualquiera que tocare en muerto á cuchillo sobre la haz del campo, ó en muerto, ó en hueso humano, ó en sepulcro, siete días será inmundo.
Toma á Aarón y á Eleazar su hijo, y hazlos subir al monte de Hor;
Porque Hesbón era la ciudad de Sehón, rey de los Amorrheos; el cual había tenido guerra antes con el rey de Moab, y tomado de su poder toda su tierra hasta Arnón.
Así Balaam se levantó por la mañana, y cinchó su asna, y fué con los príncipes de Moab.
¿Quién contará el polvo de Jacob, o el número de la cuarta parte de Israel? Muera mi persona de la muerte de los rectos, y mi postrimería sea como la suya.
Húyete, por tanto, ahora á tu lugar: yo dije que te honraría, mas he aquí que Jehová te ha privado de honra.
Y Jehová habló á Moisés, diciendo:
Los hijos de José por sus familias: Manasés y Ephraim.
Y la mujer de Amram se llamó Jochâbed, hija de Leví, la cual nació á Leví en Egipto: ésta parió de Amram á Aarón y á Moisés, y á María su hermana.
Y HABLÓ Jehová á Moisés, diciendo:
Los ofreceréis, además del holocausto continuo con sus presentes, y sus libaciones: sin defecto los tomaréis.
Y un macho cabrío por expiación: además del holocausto continuo, su presente y sus libaciones.
Ciertamente el oro, y la plata, metal, hierro, estaño, y plomo,
Y todo el oro de la ofrenda que ofrecieron á Jehová de los tribunos y centuriones, fué diez y seis mil setecientos y cincuenta siclos.
Entonces los encomendó Moisés á Eleazar el sacerdote, y á Josué hijo de Nun, y á los príncipes de los padres de las tribus de los hijos de Israel.
Y partidos de Kibroth-hataava, asentaron en Haseroth.
Y partidos de Almon-diblathaim, asentaron en los montes de Abarim, delante de Nebo.
De la tribu de Benjamín, Elidad hijo de Chislón.
O bien, sin verlo, hizo caer sobre él alguna piedra, de que pudo morir, y muriere, y él no era su enemigo, ni procuraba su mal;
Jehová nuestro Dios nos habló en Horeb, diciendo: Harto habéis estado en este monte;
Excepto Caleb hijo de Jephone: él la verá, y á él le daré la tierra que pisó, y á sus hijos; porque cumplió en pos de Jehová.
Pueblo grande, y numeroso, y alto, como los Anaceos; á los cuales Jehová destruyó de delante de los Ammonitas, quienes les sucedieron, y habitaron en su lugar:
Jair hijo de Manasés tomó toda la tierra de Argob hasta el término de Gessur i y Machâti; y llamóla de su nombre Basán-havoth-jair, hasta hoy.
Guardad pues mucho vuestras almas: pues ninguna figura visteis el día que Jehová habló con vosotros de en medio del fuego:
Estos son los testimonios, y los estatutos, y los derechos, que Moisés notificó á los hijos de Israel, cuando hubieron salido de Egipto;
Llega tú, y oye todas las cosas que dijere Jehová nuestro Dios; y tú nos dirás todo lo que Jehová nuestro Dios te dijere, y nosotros oiremos y haremos.
Y mandónos Jehová que ejecutásemos todos estos estatutos, y que temamos á Jehová nuestro Dios, porque nos vaya bien todos los días, y para que nos dé vida, como hoy.
Y te afligió, é hízote tener hambre, y te sustentó con maná, comidaque no conocías tú, ni tus padres la habían conocido; para hacerte saber que el hombre no vivirá de solo pan, mas de todo lo que sale de la boca de Jehová vivirá el hombre.
Déjame que los destruya, y raiga su nombre de debajo del cielo; que yo te pondré sobre gente fuerte y mucha más que ellos.
Solamente de tus padres se agradó Jehová para amarlos, y escogió su simiente después de ellos, á vosotros, de entre todos los pueblos, como en este día.
Jehová también echará todas estas gentes de delante de vosotros y poseeréis gentes grandes y más fuertes que vosotros.
Lo mismo que se come el corzo y el ciervo, así las comerás: el inmundo y el limpio comerán también de ellas.
Porque eres pueblo santo á Jehová tu Dios, y Jehová te ha escogido para que le seas un pueblo singular de entre todos los pueblos que están sobre la haz de la tierra.
Del extranjero demandarás el reintegro: mas lo que tu hermano tuviere tuyo, lo perdonará tu mano;
Y te alegrarás delante de Jehová tu Dios, tú, y tu hijo, y tu hija, y tu siervo, y tu sierva, y el Levita que estuviere en tus ciudades, y el extranjero, y el huérfano, y la viuda, que estuvieren en medio de ti, en el lugar que Jehová tu Dios hubiere escogido para hacer habitar allí su nombre.
Y lo tendrá consigo, y leerá en él todos los días de su vida, para que aprenda á temer á Jehová su Dios, para guardar todas las palabras de aquesta ley y estos estatutos, para ponerlos por obra:
Por tanto yo te mando, diciendo: Tres ciudades te apartarás.
Empero de las ciudades de estos pueblos que Jehová tu Dios te da por heredad, ninguna persona dejarás con vida;
No verás el asno de tu hermano, ó su buey, caídos en el camino, y te esconderás de ellos: con él has de procurar levantarlos.
Por cuanto no os salieron á recibir con pan y agua al camino, cuando salisteis de Egipto; y porque alquiló contra ti á Balaam hijo de Beor de Pethor de Mesopotamia de Siria, para que te maldijese.
Acuérdate de lo que hizo Jehová tu Dios á María en el camino, después que salisteis de Egipto.
Que te salió al camino, y te desbarató la retaguardia de todos los flacos que iban detrás de ti, cuando tú estabas cansado y trabajado; y no temió á Dios.
Oirás pues la voz de Jehová tu Dios, y cumplirás sus mandamientos y sus estatutos, que yo te ordeno hoy.
Y no te apartes de todas las palabras que yo os mando hoy, ni á diestra ni á siniestra, para ir tras dioses ajenos para servirles.
Y vendrán sobre ti todas estas maldiciones, y te perseguirán, y te alcanzarán hasta que perezcas; por cuanto no habrás atendido á la voz de Jehová tu Dios, para guardar sus mandamientos y sus estatutos, que él te mandó:
Y llegasteis á este lugar, y salió Sehón rey de Hesbón, y Og rey de Basán, delante de nosotros para pelear, y herímoslos;
Y tú volverás, y oirás la voz de Jehová, y pondrás por obra todos sus mandamientos, que yo te intimo hoy.
Empero yo esconderé ciertamente mi rostro en aquel día, por todo el mal que ellos habrán hecho, por haberse vuelto á dioses ajenos.
Y viólo Jehová, y encendióse en ira, por el menosprecio de sus hijos y de sus hijas.
Sube á este monte de Abarim, al monte Nebo, que está en la tierra de Moab, que está en derecho de Jericó, y mira la tierra de Canaán, que yo doy por heredad á los hijos de Israel;
El eterno Dios es tu refugio, y acá abajo los brazos eternos; él echará de delante de ti al enemigo, y dirá: Destruye.
De la manera que obedecimos á Moisés en todas las cosas, así te obedeceremos á ti: solamente Jehová tu Dios sea contigo, como fué con Moisés.
Y Josué dijo al pueblo: Santificaos, porque Jehová hará mañana entre vosotros maravillas.
Y aconteció que como los sacerdotes que llevaban el arca del pacto de Jehová, subieron del medio del Jordán, y las plantas de los pies de los sacerdotes estuvieron en seco, las aguas del Jordán se volvieron á su lugar, corriendo como antes sobre todos sus bordes.
Y Josué mandó al pueblo, diciendo: Vosotros no daréis grita, ni se oirá vuestra voz, ni saldrá palabra de vuestra boca, hasta el día que yo os diga: Gritad: entonces daréis grita.
Levántate, santifica al pueblo, y di: Santificaos para mañana; porque Jehová el Dios de Israel dice así: Anatema hay en medio de ti, Israel; no podrás estar delante de tus enemigos, hasta tanto que hayáis quitado el anatema de en medio de vosotros.
Y no quedó hombre en Hai y Beth-el, que no saliera tras de Israel; y por seguir á Israel dejaron la ciudad abierta.
Este nuestro pan tomamos caliente de nuestras casas para el camino el día que salimos para venir á vosotros; y helo aquí ahora que está seco y mohoso:
Pero los cinco reyes huyeron, y se escondieron en una cueva en Maceda.
Y al Cananeo que estaba al oriente y al occidente, y al Amorrheo, y al Hetheo, y al Pherezeo, y al Jebuseo en las montañas, y al Heveo debajo de Hermón en tierra de Mizpa.
El rey de Jerusalem, otro: el rey de Hebrón, otro:
Hesbón, con todas sus villas que están en la llanura; Dibón, y Bamoth-baal, y Beth-baal-meón;
Por tanto Hebrón fué de Caleb, hijo de Jephone Cenezeo, en heredad hasta hoy; porque cumplió siguiendo á Jehová Dios de Israel.
Baala, é Iim, y Esem,
Chîriath-baal, que es Chîriath-jearim, y Rabba; dos ciudades con sus aldeas.
Entonces Josué respondió á la casa de José, á Ephraim y Manasés, diciendo: Tú eres gran pueblo, y tienes gran fuerza; no tendrás una sola suerte;
LA SEGUNDA suerte salió por Simeón, por la tribu de los hijos de Simeón conforme á sus familias; y su heredad fué entre la heredad de los hijos de Judá.
La sexta suerte salió por los hijos de Nephtalí, por los hijos de Nephtalí conforme á sus familias.
Y habláronles en Silo en la tierra de Canaán, diciendo: Jehová mandó por Moisés que nos fuesen dadas villas para habitar, con sus ejidos para nuestras bestias.
Y de la tribu de Nephtalí, la villa de refugio para los homicidas, á Cedes en Galilea con sus ejidos, á Hammoth-dor con sus ejidos, y á Cartán con sus ejidos: tres villas:
¿Nos ha sido poco la maldad de Peor, de la que no estamos aún limpios hasta este día, por la cual fué la mortandad en la congregación de Jehová?
Y he aquí que yo estoy para entrar hoy por el camino de toda la tierra: reconoced, pues, con todo vuestro corazón y con toda vuestra alma, que no se ha perdido una palabra de todas la buenas palabras que Jehová vuestro Dios había dicho de vosotros: todas os han venido, no se ha perdido de ellas ni una.
Y envió Josué al pueblo, cada uno á su heredad.
Y él les mostró la entrada á la ciudad, é hiriéronla á filo de espada; mas dejaron á aquel hombre con toda su familia.
Y la ira de Jehová se encendió contra Israel, y dijo: Pues que esta gente traspasa mi pacto que ordené á sus padres, y no obedecen mi voz,
Y como hubo entrado, tocó el cuerno en el monte de Ephraim, y los hijos de Israel descendieron con él del monte, y él iba delante de ellos.
Porque ha vengado las injurias de Israel, porque el pueblo se ha ofrecido de su voluntad, load á Jehová.
Y la mano de Madián prevaleció contra Israel. Y los hijos de Israel, por causa de los Madianitas, se hicieron cuevas en los montes, y cavernas, y lugares fuertes.
Y aquel día llamó él á Gedeón Jerobaal; porque dijo: Pleitee Baal contra el que derribó su altar.
Mas los trescientos tocaban las bocinas: y Jehová puso la espada de cada uno contra su compañero en todo el campo. Y el ejército huyó hasta Beth-sitta, hacia Cerera, y hasta el término de Abel-mehola en Tabbat.
Y Gedeón hizo de ellos un ephod, el cual hizo guardar en su ciudad de Ophra: y todo Israel fornicó tras de ese ephod en aquel lugar; y fué por tropiezo á Gedeón y á su casa.
Envió Dios un espíritu malo entre Abimelech y los hombres de Sichêm: que los de Sichêm se levantaron contra Abimelech:
Mas una mujer dejó caer un pedazo de una rueda de molino sobre la cabeza de Abimelech, y quebróle los cascos.
Y los ancianos de Galaad respondieron á Jephté: Por esta misma causa tornamos ahora á ti, para que vengas con nosotros, y pelees contra los hijos de Ammón, y nos seas cabeza á todos los que moramos en Galaad.
Pasados los dos meses volvió á su padre, é hizo de ella conforme á su voto que había hecho. Y ella nunca conoció varón.
Ella no comerá cosa que proceda de vid que da vino; no beberá vino ni sidra, y no comerá cosa inmunda: ha de guardar todo lo que le mandé.
Y él les respondió: Si no araseis con mi novilla, nunca hubierais descubierto mi enigma.
Y él le dijo: Si me ataren fuertemente con cuerdas nuevas, con las cuales ninguna cosa se haya hecho, yo me debilitaré, y seré como cualquiera de los hombres.
Entonces Michâs le dijo: Quédate en mi casa, y me serás en lugar de padre y sacerdote; y yo te daré diez siclos de plata por año, y el ordinario de vestidos, y tu comida. Y el Levita se quedó.
Y ellos llevando las cosas que había hecho Michâs, juntamente con el sacerdote que tenía, llegaron á Lais, al pueblo reposado y seguro; y metiéronlos á cuchillo, y abrasaron la ciudad con fuego.
Y ya que amanecía, la mujer vino, y cayó delante de la puerta de la casa de aquel hombre donde su señor estaba, hasta que fué de día.
Y los hijos de Israel preguntaron á Jehová, (porque el arca del pacto de Dios estaba allí en aquellos días,
Porque el pueblo fué contado, y no hubo allí varón de los moradores de Jabes-galaad.
Entonces le dijo Eli: ¿Hasta cuándo estarás borracha?; digiere tu vino.
Era pues el pecado de los mozos muy grande delante de Jehová; porque los hombres menospreciaban los sacrificios de Jehová.
Y Jehová dijo á Samuel: He aquí haré yo una cosa en Israel, que á quien la oyere, le retiñirán ambos oídos.
Y al tiempo que se moría, decíanle las que estaban junto á ella: No tengas temor, porque has parido un hijo. Mas ella no respondió, ni paró mientes.
Estas pues son las hemorroides de oro que pagaron los Filisteos á Jehová en expiación: por Asdod una, por Gaza una, por Ascalón una, por Gath una, por Ecrón una;
Ahora pues, oye su voz: mas protesta contra ellos declarándoles el derecho del rey que ha de reinar sobre ellos.
Y luego que Samuel vió á Saúl, Jehová le dijo: He aquí éste es el varón del cual te hablé; éste señoreará á mi pueblo.
E hizo llegar la tribu de Benjamín por sus linajes, y fué tomada la familia de Matri; y de ella fué tomado Saúl hijo de Cis. Y le buscaron, mas no fué hallado.
Y olvidaron á Jehová su Dios, y él los vendió en la mano de Sísara capitán del ejército de Asor, y en la mano de los Filisteos, y en la mano del rey de Moab, los cuales les hicieron guerra.
Mas ahora tu reino no será durable: Jehová se ha buscado varón según su corazón, al cual Jehová ha mandado que sea capitán sobre su pueblo, por cuanto tú no has guardado lo que Jehová te mandó.
Y los Hebreos que habían estado con los Filisteos de tiempo antes, y habían venido con ellos de los alrededores al campo, también éstos se volvieron para ser con los Israelitas que estaban con Saúl y con Jonathán.
Y la guerra fué fuerte contra los Filisteos todo el tiempo de Saúl; y á cualquiera que Saúl veía hombre valiente y hombre de esfuerzo, juntábale consigo.
Y él dijo: Yo he pecado: mas ruégote que me honres delante de los ancianos de mi pueblo, y delante de Israel; y vuelve conmigo para que adore á Jehová tu Dios.
Y también Saúl y los hombres de Israel se juntaron, y asentaron el campo en el valle del Alcornoque, y ordenaron la batalla contra los Filisteos.
Y dijo Saúl á David: No podrás tú ir contra aquel Filisteo, para pelear con él; porque tú eres mozo, y él un hombre de guerra desde su juventud.
Y salía David á donde quiera que Saúl le enviaba, y portábase prudentemente. Hízolo por tanto Saúl capitán de gente de guerra, y era acepto en los ojos de todo el pueblo, y en los ojos de los criados de Saúl.
Porque él puso su alma en su palma, é hirió al Filisteo, y Jehová hizo una gran salud á todo Israel. Tú lo viste, y te holgaste: ¿por qué pues pecarás contra la sangre inocente, matando á David sin causa?
Entonces dijo Jonathán á David: Oh Jehová Dios de Israel, cuando habré yo preguntado á mi padre mañana á esta hora, ó después de mañana, y él apareciere bien para con David, si entonces no enviare á ti, y te lo descubriere,
Y Jonathán dijo á David: Vete en paz, que ambos hemos jurado por el nombre de Jehová, diciendo: Jehová sea entre mí y ti, entre mi simiente y la simiente tuya, para siempre. Y él se levantó y fuése: y Jonathán se entró en la ciudad.
¿He comenzado yo desde hoy á consultar por él á Dios? lejos sea de mí: no impute el rey cosa alguna á su siervo, ni á toda la casa de mi padre; porque tu siervo ninguna cosa sabe de este negocio, grande ni chica.
Id pues ahora, apercibid aún, considerad y ved su lugar donde tiene el pie, y quién lo haya visto allí; porque se me ha dicho que él es en gran manera astuto.
No ponga ahora mi señor su corazón á aquel hombre brusco, á Nabal; porque conforme á su nombre, así es. El se llama Nabal, y la locura está con él: mas yo tu sierva no vi los criados de mi señor, los cuales tú enviaste.
Guárdeme Jehová de extender mi mano contra el ungido de Jehová; empero toma ahora la lanza que está á su cabecera, y la botija del agua, y vámonos.
Pues como los Filisteos se juntaron, vinieron y asentaron campo en Sunam: y Saúl juntó á todo Israel, y asentaron campo en Gilboa.
Levántate pues de mañana, tú y los siervos de tu señor que han venido contigo; y levantándoos de mañana, luego al amanecer partíos.
Y á los que estaban en Rachâl, y á los que estaban en las ciudades de Jerameel, y á los que estaban en las ciudades del Cineo;
Entonces llamó David uno de los mancebos, y díjole: Llega, y mátalo. Y él lo hirió, y murió.
El cual Asael siguió á Abner, yendo tras de él sin apartarse á diestra ni á siniestra.
Y habló Abner con los ancianos de Israel, diciendo: Ayer y antes procurabais que David fuese rey sobre vosotros;
Y trajeron la cabeza de Is-boseth á David en Hebrón, y dijeron al rey: He aquí la cabeza de Is-boseth hijo de Saúl tu enemigo, que procuraba matarte; y Jehová ha vengado hoy á mi señor el rey, de Saúl y de su simiente.
Y DAVID tornó á juntar todos los escogidos de Israel, treinta mil.
Y he sido contigo en todo cuanto has andado, y delante de ti he talado todos tus enemigos, y te he hecho nombre grande, como el nombre de los grandes que son en la tierra.
Envió Toi á Joram su hijo al rey David, á saludarle pacíficamente y á bendecirle, porque había peleado con Hadad-ezer y lo había vencido: porque Toi era enemigo de Hadad-ezer. Y Joram llevaba en su mano vasos de plata, y vasos de oro, y de metal;
Viendo pues Joab que había escuadrones delante y detrás de él, entresacó de todos los escogidos de Israel, y púsose en orden contra los Siros.
¿Quién hirió á Abimelech hijo de Jerobaal? ¿no echó una mujer del muro un pedazo de una rueda de molino, y murió en Thebes? ¿por qué os llegasteis al muro?: entonces tú le dirás: También tu siervo Uría Hetheo es muerto.
Y consoló David á Bath-sheba su mujer, y entrando á ella, durmió con ella; y parió un hijo, y llamó su nombre Salomón, al cual amó Jehová:
Y aconteció pasados dos años, que Absalom tenía esquiladores en Bala-hasor, que está junto á Ephraim; y convidó Absalom á todos los hijos del rey.
Y que yo he venido ahora para decir esto al rey mi señor, es porque el pueblo me ha puesto miedo. Mas tu sierva dijo: Hablaré ahora al rey: quizá él hará lo que su sierva diga.
También envió Absalom por Achitophel Gilonita, del consejo de David, á Gilo su ciudad, mientras hacía sus sacrificios. Y la conjuración vino á ser grande, pues se iba aumentando el pueblo con Absalom.
Y vino el rey David hasta Bahurim: y he aquí, salía uno de la familia de la casa de Saúl, el cual se llamaba Semei, hijo de Gera; y salía maldiciendo,
Y si se recogiere en alguna ciudad, todos los de Israel traerán sogas á aquella ciudad, y la arrastraremos hasta el arroyo, que nunca más parezca piedra de ella.
Y respondió Joab: No es razón que yo te ruegue. Y tomando tres dardos en sus manos, hincólos en el corazón de Absalom, que aun estaba vivo en medio del alcornoque.
Y el rey David envió á Sadoc y á Abiathar sacerdotes, diciendo: Hablad á los ancianos de Judá y decidles: ¿Por qué seréis vosotros los postreros en volver el rey á su casa, ya que la palabra de todo Israel ha venido al rey de volverle á su casa?
Y he aquí todos los varones de Israel vinieron al rey, y le dijeron: ¿Por qué los hombres de Judá, nuestros hermanos, te han llevado, y han hecho pasar el Jordán al rey y á su familia, y á todos los varones de David con él?
Y los Gabaonitas le respondieron: No tenemos nosotros querella sobre plata ni sobre oro con Saúl y con su casa: ni queremos que muera hombre de Israel. Y él les dijo: Lo que vosotros dijereis os haré.
Puso tinieblas alrededor de sí á modo de pabellones; aguas negras y espesas nubes.
Miraron, y no hubo quien los librase; á Jehová, mas no les respondió.
Esto hizo Benaía hijo de Joiada, y tuvo nombre entre los tres valientes.
Vino pues Gad á David, é intimóle, y díjole: ¿Quieres que te vengan siete años de hambre en tu tierra? ¿ó que huyas tres meses delante de tus enemigos, y que ellos te persigan? ¿ó que tres días haya pestilencia en tu tierra? Piensa ahora, y mira qué responderé al que me ha enviado.
Y he aquí ahora Adonía reina: y tú, mi señor rey, ahora no lo supiste.
Ellos entonces se estremecieron, y levantáronse todos los convidados que estaban con Adonía, y fuése cada uno por su camino.
Y á Abiathar sacerdote dijo el rey: Vete á Anathoth á tus heredades, que tú eres digno de muerte; mas no te mataré hoy, por cuanto has llevado el arca del Señor Jehová delante de David mi padre, y además has sido trabajado en todas las cosas en que fué trabajado mi padre.
Y agradó delante de Adonai que Salomón pidiese esto.
Baana hijo de Ahilud, en Taanach y Megiddo, y en toda Beth-san, que es cerca de Zaretán, por bajo de Jezreel, desde Beth-san hasta Abel-mehola, y hasta la otra parte de Jocmeam;
Mis siervos la llevarán desde el Líbano á la mar; y yo la pondré en balsas por la mar hasta el lugar que tú me señalares, y allí se desatará, y tú la tomarás: y tú harás mi voluntad en dar de comer á mi familia.
De suerte que vistió Salomón de oro puro la casa por de dentro, y cerró la entrada del oráculo con cadenas de oro, y vistiólo de oro.
Y envió el rey Salomón, é hizo venir de Tiro á Hiram,
Y un mar, y doce bueyes debajo del mar;
Dijo: Jehová Dios de Israel, no hay Dios como tú, ni arriba en los cielos ni abajo en la tierra, que guardas el pacto y la misericordia á tus siervos, los que andan delante de ti de todo su corazón;
Pues que tú los apartaste para ti por tu heredad de todos los pueblos de la tierra, como lo dijiste por mano de Moisés tu siervo, cuando sacaste á nuestros padres de Egipto, oh Señor Jehová.
Y á Baalath, y á Tadmor en tierra del desierto;
Estaban también doce leones puestos allí sobre las seis gradas, de la una parte y de la otra: en ningún otro reino se había hecho trono semejante.
Y oyendo Adad en Egipto que David había dormido con sus padres, y que era muerto Joab general del ejército, Adad dijo á Faraón: Déjame ir á mi tierra.
Mas él, dejado el consejo de los viejos que ellos le habían dado, tomó consejo con los mancebos que se habían criado con él, y estaban delante de él.
Entonces respondiendo el rey, dijo al varón de Dios: Te pido que ruegues á la faz de Jehová tu Dios, y ora por mí, que mi mano me sea restituída. Y el varón de Dios oró á la faz de Jehová, y la mano del rey se le recuperó, y tornóse como antes.
Y dijo Jeroboam á su mujer: Levántate ahora, disfrázate, porque no te conozcan que eres la mujer de Jeroboam, y ve á Silo; que allá está Ahías profeta, el que me dijo que yo había de ser rey sobre este pueblo.
EN el año dieciocho del rey Jeroboam hijo de Nabat, Abiam comenzó á reinar sobre Judá.
Y hubo guerra entre Asa y Baasa rey de Israel, todo el tiempo de ambos.
Y Omri durmió con sus padres, y fué sepultado en Samaria; y reinó en lugar suyo Achâb, su hijo.
Entonces la mujer dijo á Elías: Ahora conozco que tú eres varón de Dios, y que la palabra de Jehová es verdad en tu boca.
Y tomando Elías doce piedras, conforme al número de las tribus de los hijos de Jacob, al cual había sido palabra de Jehová, diciendo, Israel será tu nombre;
Y díjole Jehová: Ve, vuélvete por tu camino, por el desierto de Damasco: y llegarás, y ungirás á Hazael por rey de Siria;
Haz pues así: Saca á los reyes cada uno de su puesto, y pon capitanes en lugar de ellos.
Y promulgaron ayuno, y asentaron á Naboth á la cabecera del pueblo.
Y el mensajero que había ido á llamar á Michêas, hablóle, diciendo: He aquí las palabras de los profetas á una boca anuncian al rey bien: sea ahora tu palabra conforme á la palabra de alguno de ellos, y anuncia bien.
Y anduvo en todo el camino de Asa su padre, sin declinar de él, haciendo lo recto en los ojos de Jehová.
Y saliendo á Eliseo los hijos de los profetas que estaban en Beth-el, dijéronle: ¿Sabes como Jehová quitará hoy á tu señor de tu cabeza? Y él dijo: Sí, yo lo sé; callad.
Partieron pues el rey de Israel, y el rey de Judá, y el rey de Idumea; y como anduvieron rodeando por el desierto siete días de camino, faltóles el agua para el ejército, y para las bestias que los seguían.
Entonces dijo á Giezi su criado: Llama á esta Sunamita. Y como él la llamó, pareció ella delante de él.
Vino entonces un hombre de Baal-salisa, el cual trajo al varón de Dios panes de primicias, veinte panes de cebada, y trigo nuevo en su espiga. Y él dijo: Da á la gente para que coman.
Vamos ahora al Jordán, y tomemos de allí cada uno una viga, y hagámonos allí lugar en que habitemos. Y él dijo: Andad.
Estaba á la sazón Eliseo sentado en su casa, y con él estaban sentados los ancianos: y el rey envió á él un hombre. Mas antes que el mensajero viniese á él, dijo él á los ancianos: ¿No habéis visto cómo este hijo del homicida me envía á quitar la cabeza? Mirad pues, y cuando viniere el mensajero, cerrad la puerta, é impedidle la entrada: ¿no viene tras él el ruido de los pies de su amo?
Tomó pues Hazael en su mano un presente de todos los bienes de Damasco, cuarenta camellos cargados, y saliólo á recibir: y llegó, y púsose delante de él, y dijo: Tu hijo Ben-adad, rey de Siria, me ha enviado á ti, diciendo: ¿Tengo de sanar de esta enfermedad?
Después salió Jehú á los siervos de su señor, y dijéronle: ¿Hay paz? ¿para qué entró á ti aquel loco? Y él les dijo: Vosotros conocéis al hombre y sus palabras.
Mas ellos tuvieron gran temor, y dijeron: He aquí dos reyes no pudieron resistirle, ¿cómo le resistiremos nosotros?
Lo demás de los hechos de Jehú, y todas las cosas que hizo, y toda su valentía, ¿no está escrito en el libro de las crónicas de los reyes de Israel?
Llamando entonces el rey Joas al pontífice Joiada y á los sacerdotes, díjoles: ¿Por qué no reparáis las aberturas del templo? Ahora pues, no toméis más el dinero de vuestros familiares, sino dadlo para reparar las roturas del templo.
Y dijo: Abre la ventana de hacia el oriente. Y como él la abrió dijo Eliseo: Tira. Y tirando él, dijo Eliseo: Saeta de salud de Jehová, y saeta de salud contra Siria: porque herirás á los Siros en Aphec, hasta consumirlos.
Edificó él á Elath, y la restituyó á Judá, después que el rey durmió con sus padres.
En el año cincuenta de Azarías rey de Judá, reinó Pekaía hijo de Manahem sobre Israel en Samaria, dos años.
E hizo el sacerdote Urías conforme á todas las cosas que el rey Achâz le mandó.
Entonces dijeron ellos al rey de Asiria: Las gentes que tú traspasaste y pusiste en las ciudades de Samaria, no saben la costumbre del Dios de aquella tierra, y él ha echado leones en ellos, y he aquí los matan, porque no saben la costumbre del Dios de la tierra.
Dió por tanto Ezechîas toda la plata que fué hallada en la casa de Jehová, y en los tesoros de la casa real.
Y oyó decir de Thiraca rey de Ethiopía: He aquí es salido para hacerte guerra. Entonces volvió él, y envió embajadores á Ezechîas, diciendo:
Entonces volvió él su rostro á la pared, y oró á Jehová, y dijo:
Por cuanto Manasés rey de Judá ha hecho estas abominaciones, y ha hecho más mal que todo lo que hicieron los Amorrheos que fueron antes de él, y también ha hecho pecar á Judá en sus ídolos;
Y ella les dijo: Así ha dicho Jehová el Dios de Israel: Decid al varón que os envió á mí:
Con todo eso, no se volvió Jehová del ardor de su grande ira, con que se había encendido su enojo contra Judá, por todas las provocaciones con que Manasés le había irritado.
E hizo lo malo en ojos de Jehová, conforme á todo lo que había hecho Joacim.
Y mudóle los vestidos de su prisión, y comió siempre delante de él todos los días de su vida.
Misma, Duma, Maasa, Hadad, Thema, Jetur, Naphis, y Cedma. Estos son los hijos de Ismael.
Hijo de Chârmi fué Achâr, el que alborotó á Israel, porque prevaricó en el anatema.
Y Zabad engendró á Ephlal, y Ephlal engendró á Obed;
E hijo del cual fué Achâz, del que fué hijo Ezechîas, cuyo hijo fué Manasés;
Y los hijos de la mujer de Odías, hermana de Naham, fueron el padre de Keila de Garmi, y Esthemoa de Maachâti.
Beera su hijo, el cual fué trasportado por Thiglath-pilneser rey de los Asirios. Este era principal de los Rubenitas.
Y Azarías engendró á Amarías, y Amarías engendró á Achîtob;
Hijo de Athanai, hijo de Zera, hijo de Adaia;
Y á los hijos de Gersón dieron de la familia de la media tribu de Manasés, á Golan en Basán con sus ejidos y á Astharoth con sus ejidos;
Los hijos de Ephraim: Suthela, Bered su hijo, su hijo Thahath, Elada su hijo, Thahath su hijo,
Mas de Husim engendró á Abitob, y á Elphaal.
Y CONTADO todo Israel por el orden de los linajes, fueron escritos en el libro de los reyes de Israel y de Judá, quefueron trasportados á Babilonia por su rebelión.
Y Mathathías, uno de los Levitas, primogénito de Sallum Coraita, tenía cargo de las cosas que se hacían en sartén.
Entonces se fué David con todo Israel á Jerusalem, la cual es Jebus; y allí era el Jebuseo habitador de aquella tierra.
Los hijos de Asem Gizonita, Jonathán hijo de Sajé Hararita;
Y David salió á ellos, y hablóles diciendo: Si habéis venido á mí para paz y para ayudarme, mi corazón será unido con vosotros; mas si para engañarme en pro de mis enemigos, siendo mis manos sin iniquidad, véalo el Dios de nuestros padres, y demándelo.
Y David y todo Israel hacían alegrías delante de Dios con todas sus fuerzas, con canciones, arpas, salterios, tamboriles, címbalos y trompetas.
De los hijos de Gersón, Joel el principal, y sus hermanos, ciento y treinta;
Confesad á Jehová, invocad su nombre, haced notorias en los pueblos sus obras.
Y á Obed-edom y á sus hermanos, sesenta y ocho; y á Obed-edom hijo de Jeduthún, y á Asa, por porteros:
Ahora pues, Jehová, tú eres el Dios que has hablado de tu siervo este bien;
Y dijo: Si los Siros fueren más fuertes que yo, tú me salvarás; y si los Ammonitas fueren más fuertes que tú, yo te salvaré.
Y envió Jehová el ángel á Jerusalem para destruirla: pero estando él destruyendo, miró Jehová, y arrepintióse de aquel mal,
Del oro, de la plata, del metal, y del hierro, no hay número. Levántate pues, y á la obra; que Jehová será contigo.
Así que, conforme á las postreras palabras de David, fué la cuenta de los hijos de Leví de veinte años arriba.
Hermano de Michâ, Isía; é hijo de Isía, Zachârías.
La décimaoctava á Hanani, con sus hijos y sus hermanos, doce;
Sebuel hijo de Gersón, hijo de Moisés, era principal sobre los tesoros.
Y de Dan, Azarael hijo de Jeroam. Estos fueron los jefes de las tribus de Israel.
Además, oro puro por peso para el altar del perfume, y para el á manera de carro de los querubines de oro, que con las alas extendidas cubrían el arca del pacto de Jehová.
Y murió en buena vejez, lleno de días, de riquezas, y de gloria: y reinó en su lugar Salomón su hijo.
Entonces Hiram rey de Tiro respondió por letras, las que envió á Salomón: Porque Jehová amó á su pueblo, te ha puesto por rey sobre ellos.
Hizo también diez fuentes, y puso cinco á la derecha y cinco á la izquierda, para lavar y limpiar en ellas la obra del holocausto; mas el mar era para lavarse los sacerdotes en él.
ENTONCES dijo Salomón: Jehová ha dicho que él habitaría en la oscuridad.
Para que te teman y anden en tus caminos, todos los días que vivieren sobre la haz de la tierra que tú diste á nuestros padres.
Mas si vosotros os volviereis, y dejareis mis estatutos y mis preceptos que os he propuesto, y fuereis y sirviereis á dioses ajenos, y los adorareis,
También los siervos de Hiram y los siervos de Salomón, que habían traído el oro de Ophir, trajeron madera de Algummim, y piedras preciosas.
Y díjoles: ¿Qué aconsejáis vosotros que respondamos á este pueblo, que me ha hablado, diciendo: Alivia algo del yugo que tu padre puso sobre nosotros?
Después de ella tomó á Maachâ hija de Absalom, la cual le parió á Abías, á Athai, Ziza, y Selomith.
Y he aquí Dios está con nosotros por cabeza, y sus sacerdotes con las trompetas del júbilo para que suenen contra vosotros. Oh hijos de Israel, no peleéis contra Jehová el Dios de vuestros padres, porque no os sucederá bien.
En aquellos tiempos no hubo paz, ni para el que entraba, ni para el que salía, sino muchas aflicciones sobre todos los habitadores de las tierras.
Y puso ejército en todas las ciudades fuertes de Judá, y colocó gente de guarnición, en tierra de Judá, y asimismo en las ciudades de Ephraim que su padre Asa había tomado.
Y dijo Michêas: Vive Jehová, que lo que mi Dios me dijere, eso hablaré. Y vino al rey.
En cualquier causa que viniere á vosotros de vuestros hermanos que habitan en las ciudades, entre sangre y sangre, entre ley y precepto, estatutos y derechos, habéis de amonestarles que no pequen contra Jehová, porque no venga ira sobre vosotros y sobre vuestros hermanos. Obrando así no pecaréis.
Y fué el pavor de Dios sobre todos los reinos de aquella tierra, cuando oyeron que Jehová había peleado contra los enemigos de Israel.
Cuando Ochôzías comenzó á reinar era de cuarenta y dos años, y reinó un año en Jerusalem. El nombre de su madre fué Athalía, hija de Omri.
Y todo el pueblo del país hizo alegrías: y la ciudad estuvo quieta, muerto que hubieron á Athalía á cuchillo.
Y luego que fué confirmado en el reino, mató á sus siervos que habían muerto al rey su padre;
Y persistió en buscar á Dios en los días de Zachârías, entendido en visiones de Dios; y en estos días que él buscó á Jehová, él le prosperó.
Asimismo sacrificó y quemó perfumes en los altos, y en los collados, y debajo de todo árbol espeso.
Y aun cerraron las puertas del pórtico, y apagaron las lámparas; no quemaron perfume, ni sacrificaron holocausto en el santuario al Dios de Israel.
ENVIÓ también Ezechîas por todo Israel y Judá, y escribió letras á Ephraim y Manasés, que viniesen á Jerusalem á la casa de Jehová, para celebrar la pascua á Jehová Dios de Israel.
Mandó también al pueblo que habitaba en Jerusalem, que diesen la porción á los sacerdotes y Levitas, para que se esforzasen en la ley de Jehová.
¿Qué dios hubo de todos los dioses de aquellas gentes que destruyeron mis padres, que pudiese salvar su pueblo de mis manos? ¿Por qué podrá vuestro Dios libraros de mi mano?
Daban asimismo á los oficiales y albañiles para que comprasen piedra de cantería, y madera para las trabazones, y para entabladura de las casas, las cuales habían destruído los reyes de Judá.
También sus príncipes ofrecieron con liberalidad al pueblo, y á los sacerdotes y Levitas. Hilcías, Zachârías y Jehiel, príncipes de la casa de Dios, dieron á los sacerdotes para hacer la pascua dos mil seiscientas ovejas, y trescientos bueyes.
E hizo lo malo en ojos de Jehová su Dios, y no se humilló delante de Jeremías profeta, que le hablabade parte de Jehová.
Los hijos de Zattu, novecientos cuarenta y cinco;
Los hijos de Pashur, mil doscientos cuarenta y siete;
Según sus fuerzas dieron al tesorero de la obra sesenta y un mil dracmas de oro, y cinco mil libras de plata, y cien túnicas sacerdotales.
Hacemos saber al rey, que si esta ciudad fuere edificada, y erigidos sus muros, la parte allá del río no será tuya.
Y también los vasos de oro y de plata de la casa de Dios, que Nabucodonosor sacó del templo que estaba en Jerusalem y los pasó á Babilonia, sean devueltos y vayan al templo que está en Jerusalem, á su lugar, y sean puestos en la casa de Dios.
Por mí es dado mandamiento, que cualquiera que quisiere en mi reino, del pueblo de Israel y de sus sacerdotes y Levitas, ir contigo á Jerusalem, vaya.
Entonces despaché á Eliezer, y á Ariel, y á Semaías, y á Elnathán, y á Jarib, y á Elnathán, y á Nathán, y á Zacarías, y á Mesullam, principales; asimismo á Joiarib y á Elnathán, hombres doctos;
Mas ahora, ¿qué diremos, oh Dios nuestro, después de esto? porque nosotros hemos dejado tus mandamientos,
Asimismo de Israel: De los hijos de Pharos: Ramía é Izzías, y Malchías, y Miamim, y Eleazar, y Malchías, y Benaías.
Y FUÉ en el mes de Nisán, en el año veinte del rey Artajerjes, que estando ya el vino delante de él, tomé el vino, y dílo al rey. Y como yo no había estado antes triste en su presencia,
Malchîas hijo de Harim y Hasub hijo de Pahath-moab, restauraron la otra medida, y la torre de los Hornos.
Entonces oramos á nuestro Dios, y por causa de ellos pusimos guarda contra ellos de día y de noche.
Además ciento y cincuenta hombres de los Judíos y magistrados, y los que venían á nosotros de las gentes que están en nuestros contornos, estaban á mi mesa.
Los hijos de Sephatías, trescientos setenta y dos;
Sacerdotes: los hijos de Jedaías, de la casa de Jesuá, novecientos setenta y tres;
Y algunos de los príncipes de las familias dieron para la obra. El Tirsatha dió para el tesoro mil dracmas de oro, cincuenta tazones, y quinientas treinta vestiduras sacerdotales.
Y miraste la aflicción de nuestros padres en Egipto, y oíste el clamor de ellos en el mar Bermejo;
Y LOS que firmaron fueron, Nehemías el Tirsatha, hijo de Hachâlías, y Sedecías,
Asimismo, que si los pueblos de la tierra trajesen á vender mercaderías y comestibles en día de sábado, nada tomaríamos de ellos en sábado, ni en día santificado; y que dejaríamos el año séptimo, con remisión de toda deuda.
Porque había mandamiento del rey acerca de ellos, y determinación acerca de los cantores para cada día.
De Abías, Zichri; de Miniamín, de Moadías, Piltai;
Y todo Israel en días de Zorobabel, y en días de Nehemías, daba raciones á los cantores y á los porteros, cada cosa en su día: consagraban asimismo sus porciones á los Levitas, y los Levitas consagraban parte á los hijos de Aarón.
Y para la ofrenda de la leña en los tiempos señalados, y para las primicias. Acuérdate de mí, Dios mío, para bien.
Sucedió pues, que como se divulgó el mandamiento del rey y su acuerdo, y siendo reunidas muchas mozas en Susán residencia regia, á cargo de Hegai, fué tomada también Esther para casa del rey, al cuidado de Hegai, guarda de las mujeres.
Y salieron los correos de priesa por mandato del rey, y el edicto fué dado en Susán capital del reino. Y el rey y Amán estaban sentados á beber, y la ciudad de Susán estaba conmovida.
Y díjole Zeres su mujer, y todos sus amigos: Hagan una horca alta de cincuenta codos, y mañana di al rey que cuelguen á Mardochêo en ella; y entra con el rey al banquete alegre. Y plugo la cosa en los ojos de Amán, é hizo preparar la horca.
Porque ¿cómo podré yo ver el mal que alcanzará á mi pueblo? ¿cómo podré yo ver la destrucción de mi nación?
Por tanto los Judíos aldeanos que habitan en las villas sin muro, hacen á los catorce del mes de Adar el día de alegría y de banquete, y buen día, y de enviar porciones cada uno á su vecino.
Y vino un mensajero á Job, que le dijo: Estando arando los bueyes, y las asnas paciendo cerca de ellos,
Por cuanto no cerró las puertas del vientre donde yo estaba, ni escondió de mis ojos la miseria.
Sobrevínome un espanto y un temblor, que estremeció todos mis huesos:
Pues aun con las piedras del campo tendrás tu concierto, y las bestias del campo te serán pacíficas.
También os arrojáis sobre el huérfano, y hacéis hoyo delante de vuestro amigo.
Si fueres limpio y derecho, cierto luego se despertará sobre ti, y hará próspera la morada de tu justicia.
¿Cuánto menos le responderé yo, y hablaré con él palabras estudiadas?
¿No me fundiste como leche, y como un queso me cuajaste?
Y confiarás, que habrá esperanza; y cavarás, y dormirás seguro:
Mas yo hablaría con el Todopoderoso, y querría razonar con Dios.
Ciertamente sus días están determinados, y el número de sus meses está cerca de ti: tú le pusiste términos, de los cuales no pasará.
¿Qué cosa es el hombre para que sea limpio, y que se justifique el nacido de mujer?
Su furor me destrizó, y me ha sido contrario: crujió sus dientes contra mí; contra mí aguzó sus ojos mi enemigo.
Y RESPONDIÓ Bildad Suhita, y dijo:
E hizo inflamar contra mí su furor, y contóme para sí entre sus enemigos.
Si el mal se endulzó en su boca, si lo ocultaba debajo de su lengua;
Gastan sus días en bien, y en un momento descienden á la sepultura.
Por tanto hay lazos alrededor de ti, y te turba espanto repentino;
Mas él conoció mi camino: probaráme, y saldré como oro.
Le dieron á crédito, y se afirmó: sus ojos están sobre los caminos de ellos.
¿Oirá Dios su clamor cuando la tribulación sobre él viniere?
No puede ser apreciada con oro de Ophir, ni con onique precioso, ni con zafiro.
Y decía yo: En mi nido moriré, y como arena multiplicaré días.
Porque yo conozco que me reduces á la muerte; y á la casa determinada á todo viviente.
Porque temí el castigo de Dios, contra cuya alteza yo no tendría poder.
Porque no digáis: Nosotros hemos hallado sabiduría: lanzólo Dios, no el hombre.
Su carne desfallece sin verse, y sus huesos, que antes no se veían, aparecen.
¿Cuánto menos á aquel que no hace acepción de personas de príncipes, ni el rico es de él más respetado que el pobre? porque todos son obras de sus manos.
Allí clamarán, y él no oirá, por la soberbia de los malos.
El reduce las gotas de las aguas, al derramarse la lluvia según el vapor;
Y RESPONDIÓ Jehová á Job desde un torbellino, y dijo:
¿Podrás tú impedir las delicias de las Pléyades, ó desatarás las ligaduras del Orión?
Las partes momias de su carne están apretadas: están en él firmes, y no se mueven.
Antes en la ley de Jehová está su delicia, y en su ley medita de día y de noche.
Tú diste alegría en mi corazón, más que tienen ellos en el tiempo que se multiplicó su grano y su mosto.
Y te rodeará concurso de pueblo; por cuyo amor vuélvete luego á levantar en alto.
Cantad á Jehová, que habita en Sión: noticiad en los pueblos sus obras.
Jehová en el templo de su santidad: la silla de Jehová está en el cielo: sus ojos ven, sus párpados examinan á los hijos de los hombres.
Michtham de David. GUÁRDAME, oh Dios, porque en ti he confiado.
Dolores del sepulcro me rodearon, previniéronme lazos de muerte.
Ensanchaste mis pasos debajo de mí, y no titubearon mis rodillas.
Envíete ayuda desde el santuario, y desde Sión te sostenga.
Sobre ti fuí echado desde la matriz: desde el vientre de mi madre, tú eres mi Dios.
¿Quién subirá al monte de Jehová? ¿y quién estará en el lugar de su santidad?
Pruébame, oh Jehová, y sondéame: examina mis riñones y mi corazón.
Bendito Jehová, que oyó la voz de mis ruegos.
Me sacarás de la red que han escondido para mí; porque tú eres mi fortaleza.
Alegraos en Jehová, y gozaos, justos: y cantad todos vosotros los rectos de corazón.
Gustad, y ved que es bueno Jehová: dichoso el hombre que confiará en él.
Con los lisonjeros escarnecedores truhanes, crujiendo sobre mí sus dientes.
Calla á Jehová, y espera en él: no te alteres con motivo del que prospera en su camino, por el hombre que hace maldades.
Considera al íntegro, y mira al justo: que la postrimería de cada uno de ellos es paz.
He aquí diste á mis días término corto, y mi edad es como nada delante de ti: ciertamente es completa vanidad todo hombre que vive. (Selah.)
Y si venía á verme, hablaba mentira: su corazón se amontonaba iniquidad; y salido fuera, hablábala.
Pues tú nos has guardado de nuestros enemigos, y has avergonzado á los que nos aborrecían.
Y deseará el rey tu hermosura: é inclínate á él, porque él es tu Señor.
Porque he aquí los reyes de la tierra se reunieron; pasaron todos.
Salmo de Asaph. EL Dios de dioses, Jehová, ha hablado, y convocado la tierra desde el nacimiento del sol hasta donde se pone.
Hazme oir gozo y alegría; y se recrearán los huesos que has abatido.
He aquí, Dios es el que me ayuda; el Señor es con los que sostienen mi vida.
Todos los días me contristan mis negocios; contra mí son todos sus pensamientos para mal.
Entonces dirá el hombre: Ciertamente hay fruto para el justo; ciertamente hay Dios que juzga en la tierra.
Al Músico principal: sobre Neginoth: Salmo de David. OYE, oh Dios, mi clamor; á mi oración atiende.
Al Músico principal: Salmo de David. ESCUCHA, oh Dios, mi voz en mi oración: guarda mi vida del miedo del enemigo.
Bendecid, pueblos, á nuestro Dios, y haced oir la voz de su alabanza.
El Señor daba palabra: de las evangelizantes había grande ejército.
No sean avergonzados por mi causa los que te esperan, oh Señor Jehová de los ejércitos; no sean confusos por mí los que te buscan, oh Dios de Israel.
Al Músico principal: Salmo de David, para conmemorar. OH Dios, acude á librarme; apresúrate, oh Dios, á socorrerme.
El juzgará tu pueblo con justicia, y tus afligidos con juicio.
He aquí estos impíos, sin ser turbados del mundo, alcanzaron riquezas.
Tú abriste fuente y río; tú secaste ríos impetuosos.
Cortará él el espíritu de los príncipes: terrible es á los reyes de la tierra.
No guardaron el pacto de Dios, ni quisieron andar en su ley:
Y volvían, y tentaban á Dios, y ponían límite al Santo de Israel.
De tras las paridas lo trajo, para que apacentase á Jacob su pueblo, y á Israel su heredad.
Quemada á fuego está, asolada: perezcan por la reprensión de tu rostro.
Sobre tu pueblo han consultado astuta y secretamente, y han entrado en consejo contra tus escondidos.
Vuélvenos, oh Dios, salud nuestra, y haz cesar tu ira de sobre nosotros.
Yo me acordaré de Rahab y de Babilonia entre los que me conocen: he aquí Palestina, y Tiro, con Etiopía: éste nació allá.
Tú tienes dominio sobre la bravura de la mar: cuando se levantan sus ondas, tú las sosiegas.
Aportillaste todos sus vallados; has quebrantado sus fortalezas.
EL que habita al abrigo del Altísimo, morará bajo la sombra del Omnipotente.
Para anunciar que Jehová mi fortaleza es recto, y que en él no hay injusticia.
Porque Jehová es Dios grande; y Rey grande sobre todos los dioses.
Porque tú, Jehová, eres alto sobre toda la tierra: eres muy ensalzado sobre todos los dioses.
Corazón perverso se apartará de mí; no conoceré al malvado.
Mas tú eres el mismo, y tus años no se acabarán.
A tu reprensión huyeron; al sonido de tu trueno se apresuraron;
Cantadle, cantadle salmos: hablad de todas sus maravillas.
Volvió en su tierra sus lluvias en granizo, y en fuego de llamaradas.
Y encendióse el fuego en su junta; la llama quemó los impíos.
Bendito Jehová Dios de Israel, desde el siglo y hasta el siglo: y diga todo el pueblo, Amén. Aleluya.
Alégranse luego porque se reposaron; y él los guía al puerto que deseaban.
Y pusieron contra mí mal por bien, y odio por amor.
Juró Jehová, y no se arrepentirá: Tú eres sacerdote para siempre según el orden de Melchîsedech.
El levanta del polvo al pobre, y al menesteroso alza del estiércol,
Rodeáronme los dolores de la muerte, me encontraron las angustias del sepulcro: angustia y dolor había yo hallado.
Cercáronme como abejas; fueron apagados como fuegos de espinos: en nombre de Jehová, que yo los romperé.
Con mis labios he contado todos los juicios de tu boca.
Y no quites de mi boca en ningún tiempo la palabra de verdad; porque á tu juicio espero.
Los que te temen, me verán, y se alegrarán; porque en tu palabra he esperado.
De tus mandamientos he adquirido inteligencia: por tanto he aborrecido todo camino de mentira.
Redímeme de la violencia de los hombres; y guardaré tus mandamientos.
Mucha paz tienen los que aman tu ley; y no hay para ellos tropiezo.
Y allá subieron las tribus, las tribus de JAH, conformeal testimoniodadoá Israel, para alabar el nombre de Jehová.
Por demás os es el madrugar á levantaros, el veniros tarde á reposar, el comer pan de dolores: pues que á su amado dará Dios el sueño.
No entraré en la morada de mi casa, ni subiré sobre el lecho de mi estrado;
Envió señales y prodigios en medio de ti, oh Egipto, sobre Faraón, y sobre todos sus siervos.
Y mató reyes poderosos, porque para siempre es su misericordia;
Detrás y delante me guarneciste, y sobre mí pusiste tu mano.
Yo sé que hará Jehová el juicio del afligido, el juicio de los menesterosos.
Y por tu misericordia disiparás mis enemigos, y destruirás todos los adversarios de mi alma: porque yo soy tu siervo.
Los ojos de todos esperan en ti, y tú les das su comida en su tiempo.
El envía su palabra á la tierra; muy presto corre su palabra.
Alabadle por sus proezas: alabadle conforme á la muchedumbre de su grandeza.
También yo me reiré en vuestra calamidad, y me burlaré cuando os viniere lo que teméis;
Porque largura de días, y años de vida y paz te aumentarán.
Porque el perverso es abominado de Jehová: mas su secreto es con los rectos.
No te apartes á diestra, ni á siniestra: aparta tu pie del mal.
Prepara en el verano su comida y allega en el tiempo de la siega su mantenimiento.
Lígalos á tus dedos; escríbelos en la tabla de tu corazón.
Oid, porque hablaré cosas excelentes; y abriré mis labios para cosas rectas.
Mas el que peca contra mí, defrauda su alma: todos los que me aborrecen, aman la muerte.
En los labios del prudente se halla sabiduría: y vara á las espaldas del falto de cordura.
Por la bendición de los rectos la ciudad será engrandecida: mas por la boca de los impíos ella será trastornada.
El justo atiende á la vida de su bestia: mas las entrañas de los impíos son crueles.
El que menosprecia la palabra, perecerá por ello: mas el que teme el mandamiento, será recompensado.
Los simples heredarán necedad: mas los cuerdos se coronarán de sabiduría.
El corazón alegre hermosea el rostro: mas por el dolor de corazón el espíritu se abate.
Peso y balanzas justas son de Jehová: obra suya son todas las pesas de la bolsa.
Piedra preciosa es el cohecho en ojos de sus dueños: á donde quiera que se vuelve, da prosperidad.
Torre fuerte es el nombre de Jehová: á él correrá el justo, y será levantado.
El que guarda el mandamiento, guarda su alma: mas el que menospreciare sus caminos, morirá.
Los pensamientos con el consejo se ordenan: y con industria se hace la guerra.
El rescate del justo es el impío, y por los rectos el prevaricador.
Inclina tu oído, y oye las palabras de los sabios, y pon tu corazón á mi sabiduría:
Oye tú, hijo mío, y sé sabio, y endereza tu corazón al camino.
Tal será el conocimiento de la sabiduría á tu alma: si la hallares tendrá recompensa, y al fin tu esperanza no será cortada.
No sea que te deshonre el que lo oyere, y tu infamia no pueda repararse.
Dice el perezoso: El león está en el camino; el león está en las calles.
Gotera continua en tiempo de lluvia, y la mujer rencillosa, son semejantes:
El que en integridad camina, será salvo; mas el de perversos caminos caerá en alguno.
¿Has visto hombre ligero en sus palabras? más esperanza hay del necio que de él.
Cuatro cosas son de las más pequeñas de la tierra, y las mismas son más sabias que los sabios:
No tendrá temor de la nieve por su familia, porque toda su familia está vestida de ropas dobles.
A la risa dije: Enloqueces; y al placer: ¿De qué sirve esto?
Tiempo de romper, y tiempo de coser; tiempo de callar, y tiempo de hablar;
Vi todos los vivientes debajo del sol caminando con el muchacho sucesor, que estará en lugar de aquél.
Más vale vista de ojos que deseo que pasa. Y también esto es vanidad y aflicción de espíritu.
Lo que aun busca mi alma, y no encuentro: un hombre entre mil he hallado; mas mujer de todas éstas nunca hallé.
Porque el hombre tampoco conoce su tiempo: como los peces que son presos en la mala red, y como las aves que se prenden en lazo, así son enlazados los hijos de los hombres en el tiempo malo, cuando cae de repente sobre ellos.
El que al viento mira, no sembrará; y el que mira á las nubes, no segará.
Zarcillos de oro te haremos, con clavos de plata.
He aquí es la litera de Salomón: sesenta valientes la rodean, de los fuertes de Israel.
Mi amado es blanco y rubio, señalado entre diez mil.
Ven, oh amado mío, salgamos al campo, moremos en las aldeas.
Cuando extendiereis vuestras manos, yo esconderé de vosotros mis ojos: asimismo cuando multiplicareis la oración, yo no oiré: llenas están de sangre vuestras manos.
Y sobre todos los montes altos, y sobre todos los collados levantados;
Las ropas de remuda, los mantoncillos, los velos, y los alfileres;
¡Ay de los sabios en sus ojos, y de los que son prudentes delante de sí mismos!
Porque la cabeza de Siria es Damasco, y la cabeza de Damasco, Rezín: y dentro de sesenta y cinco años Ephraim será quebrantado hasta dejar de ser pueblo.
A Jehová de los ejércitos, á él santificad: sea él vuestro temor, y él sea vuestro miedo.
¡AY de los que establecen leyes injustas, y determinando prescriben tiranía,
Madmena se alborotó: los moradores de Gebim se juntarán.
Vienen de lejana tierra, de lo postrero de los cielos, Jehová y los instrumentos de su furor, para destruir toda la tierra.
Tú que decías en tu corazón: Subiré al cielo, en lo alto junto á las estrellas de Dios ensalzaré mi solio, y en el monte del testimonio me sentaré, á los lados del aquilón;
Reune consejo, haz juicio; pon tu sombra en medio del día como la noche: esconde los desterrados, no entregues á los que andan errantes.
Porque antes de la siega, cuando el fruto fuere perfecto, y pasada la flor fueren madurando los frutos, entonces podará con podaderas los ramitos, y cortará y quitará las ramas.
Y dijo Jehová: De la manera que anduvo mi siervo Isaías desnudo y descalzo tres años, señal y pronóstico sobre Egipto y sobre Etiopía;
E hicisteis foso entre los dos muros con las aguas de la pesquera vieja: y no tuvisteis respeto al que la hizo, ni mirasteis de lejos al que la labró.
Toma arpa, y rodea la ciudad, oh ramera olvidada: haz buena melodía, reitera la canción, porque tornes en memoria.
Como el calor en lugar seco, así humillarás el orgullo de los extraños; y como calor debajo de nube, harás marchitar el pimpollo de los robustos.
Yo Jehová la guardo, cada momento la regaré; guardaréla de noche y de día, porque nadie la visite.
Porque la cama es tan angosta que no basta, y la cubierta estrecha para recoger.
Los que hacían pecar al hombre en palabra; los que armaban lazo al que reprendía en la puerta, y torcieron lo justo en vanidad.
He aquí que el nombre de Jehová viene de lejos: su rostro encendido, y grave de sufrir; sus labios llenos de ira, y su lengua como fuego que consume;
Y habitará el juicio en el desierto, y en el campo labrado asentará la justicia.
Porque Jehová está airado sobre todas las gentes, é irritado sobre todo el ejército de ellas: destruirálas y entregarálas al matadero.
Digo, alegas tú, (empero palabras vanas) que tengo consejo y fortaleza para la guerra. Ahora bien, ¿en quién confías que te rebelas contra mí?
Y tomó Ezechîas las cartas de mano de los mensajeros, y leyólas; y subió á la casa de Jehová, y las extendió delante de Jehová.
Y te libraré, y á esta ciudad, de mano del rey de Asiria; y á esta ciudad ampararé.
Voz que decía: Da voces. Y yo respondí: ¿Qué tengo de decir á voces? Toda carne es hierba, y toda su gloria como flor del campo:
Cada cual ayudó á su cercano; y á su hermano dijo: Esfuérzate.
Para que abras ojos de ciegos, para que saques de la cárcel á los presos, y de casas de prisión á los que están de asiento en tinieblas.
Yo anuncié, y salvé, é hice oir, y no hubo entre vosotros extraño. Vosotros pues sois mis testigos, dice Jehová, que yo soy Dios.
De él se servirá luego el hombre para quemar, y tomará de ellos para calentarse; encenderá también el horno, y cocerá panes: hará además un dios, y lo adorará; fabricará un ídolo, y arrodillaráse delante de él.
Israel es salvo en Jehová con salud eterna; no os avergonzaréis, ni os afrentaréis, por todos los siglos.
Estas dos cosas te vendrán de repente en un mismo día, orfandad y viudez: en toda su perfección vendrán sobre ti, por la multitud de tus adivinanzas, y por la copia de tus muchos agüeros.
Y puso mi boca como espada aguda, cubrióme con la sombra de su mano; y púsome por saeta limpia, guardóme en su aljaba;
Porque el Señor Jehová me ayudará; por tanto no me avergoncé: por eso puse mi rostro como un pedernal, y sé que no seré avergonzado.
Porque así dice Jehová: De balde fuisteis vendidos; por tanto, sin dinero seréis rescatados.
Porque como á mujer dejada y triste de espíritu te llamó Jehová, y como á mujer moza que es repudiada, dijo el Dios tuyo.
Yo los llevaré al monte de mi santidad, y los recrearé en mi casa de oración; sus holocaustos y sus sacrificios serán aceptos sobre mi altar; porque mi casa, casa de oración será llamada de todos los pueblos.
He aquí que para contiendas y debates ayunáis, y para herir con el puño inicuamente; no ayunéis como hoy, para que vuestra voz sea oída en lo alto.
Y vendrá el Redentor á Sión, y á los que se volvieren de la iniquidad en Jacob, dice Jehová.
Porque yo Jehová soy amador del derecho, aborrecedor del latrocinio para holocausto; por tanto afirmaré en verdad su obra, y haré con ellos pacto perpetuo.
Mira desde el cielo, y contempla desde la morada de tu santidad y de tu gloria: ¿dónde está tu celo, y tu fortaleza, la conmoción de tus entrañas y de tus miseraciones para conmigo? ¿hanse estrechado?
He aquí que mis siervos cantarán por júbilo del corazón, y vosotros clamaréis por el dolor del corazón, y por el quebrantamiento de espíritu aullaréis.
Y pondré entre ellos señal, y enviaré de los escapados de ellos á las gentes, á Tarsis, á Pul y Lud, que disparan arco, á Tubal y á Javán, á las islas apartadas que no oyeron de mí, ni vieron mi gloria; y publicarán mi gloria entre las gentes.
Y os metí en tierra de Carmelo, para que comieseis su fruto y su bien: mas entrasteis, y contaminasteis mi tierra, é hicisteis mi heredad abominable.
También saldrás de él con tus manos sobre tu cabeza: porque Jehová deshechó tus confianzas, y en ellas no tendrás buen suceso.
Denunciad en Judá, y haced oir en Jerusalem, y decid: Sonad trompeta en la tierra. Pregonad, juntad, y decid: Reuníos, y entrémonos en las ciudades fuertes.
Irme he á los grandes, y hablaréles; porque ellos conocen el camino de Jehová, el juicio de su Dios. Ciertamente ellos también quebraron el yugo, rompieron las coyundas.
Denunciad guerra contra ella: levantaos y subamos hacia el mediodía. ¡Ay de nosotros! que va cayendo ya el día, que las sombras de la tarde se han extendido.
No fiéis en palabras de mentira, diciendo: Templo de Jehová, templo de Jehová, templo de Jehová es éste.
EN aquel tiempo, dice Jehová, sacarán los huesos de los reyes de Judá, y los huesos de sus príncipes, y los huesos de los sacerdotes, y los huesos de los profetas, y los huesos de los moradores de Jerusalem, fuera de sus sepulcros;
¿No los tengo de visitar sobre estas cosas? dice Jehová. ¿De tal gente no se vengará mi alma?
A su voz se da muchedumbre de aguas en el cielo, y hace subir las nubes de lo postrero de la tierra; hace los relámpagos con la lluvia, y saca el viento de sus depósitos.
Y Jehová me lo hizo saber, y conocílo: entonces me hiciste ver sus obras.
Así ha dicho Jehová: Así haré podrir la soberbia de Judá, y la mucha soberbia de Jerusalem,
Cuando ayunaren, yo no oiré su clamor, y cuando ofrecieren holocausto y ofrenda, no lo aceptaré; antes los consumiré con cuchillo, y con hambre, y con pestilencia.
Y te daré para este pueblo por fuerte muro de bronce, y pelearán contra ti, y no te vencerán: porque yo estoy contigo para guardarte y para defenderte, dice Jehová.
Engañoso es el corazón más que todas las cosas, y perverso; ¿quién lo conocerá?
Y dijeron: Es por demás: porque en pos de nuestras imaginaciones hemos de ir, y hemos de hacer cada uno el pensamiento de su malvado corazón.
Porque así ha dicho Jehová: He aquí yo te pondré en espanto á ti, y á todos los que bien te quieren, y caerán por el cuchillo de sus enemigos, y tus ojos lo verán: y á todo Judá entregaré en mano del rey de Babilonia, y los trasportará á Babilonia, y herirálos á cuchillo.
Así ha dicho Jehová: Haced juicio y justicia, y librad al oprimido de mano del opresor, y no engañéis ni robéis al extranjero, ni al huérfano, ni á la viuda, ni derraméis sangre inocente en este lugar.
Y yo recogeré el resto de mis ovejas de todas las tierras adonde las eché, y harélas volver á sus moradas; y crecerán, y se multiplicarán.
Y cuando te preguntare este pueblo, ó el profeta, ó el sacerdote, diciendo: ¿Qué es la carga de Jehová? les dirás: ¿Qué carga? Os dejaré, ha dicho Jehová.
Porque se servirán también de ellos muchas gentes, y reyes grandes; y yo les pagaré conforme á sus hechos, y conforme á la obra de sus manos.
Yo pondré esta casa como Silo, y daré esta ciudad en maldición á todas las gentes de la tierra.
Y hablé también á Sedechîas rey de Judá conforme á todas estas palabras, diciendo: Someted vuestros cuellos al yugo del rey de Babilonia, y servid á él y á su pueblo, y vivid.
Por mano de Elasa hijo de Saphán, y de Jemarías hijo de Hilcías, (los cuales envió Sedechîas rey de Judá á Babilonia, á Nabucodonosor rey de Babilonia,) diciendo:
Así habló Jehová Dios de Israel, diciendo: Escríbete en un libro todas las palabras que te he hablado.
He aquí yo los vuelvo de tierra del aquilón, y los juntaré de los fines de la tierra, y entre ellos ciegos y cojos, la mujer preñada y la parida juntamente; en grande compañía tornarán acá.
He aquí que vienen días, dice Jehová, y la ciudad será edificada á Jehová, desde la torre de Hananeel hasta la puerta del rincón.
Y vendrán los Caldeos que combaten esta ciudad, y la pondrán á fuego, y la abrasarán, asimismo las casas sobre cuyas azoteas ofrecieron perfumes á Baal y derramaron libaciones á dioses ajenos, para provocarme á ira.
En aquellos días y en aquel tiempo haré producir á David Pimpollo de justicia, y hará juicio y justicia en la tierra.
A los príncipes de Judá y á los príncipes de Jerusalem, á los eunucos y á los sacerdotes, y á todo el pueblo de la tierra, que pasaron entre las partes del becerro,
Y aconteció en el año quinto de Joacim hijo de Josías, rey de Judá, en el mes noveno, que promulgaron ayuno en la presencia de Jehová, á todo el pueblo de Jerusalem, y á todo el pueblo que venía de las ciudades de Judá á Jerusalem.
Así ha dicho Jehová Dios de Israel: Diréis así al rey de Judá, que os envió á mí para que me preguntaseis: He aquí que el ejército de Faraón que había salido en vuestro socorro, se volvió á su tierra en Egipto.
Y juró el rey Sedechîas en secreto á Jeremías, diciendo: Vive Jehová que nos hizo esta alma, que no te mataré, ni te entregaré en mano de estos varones que buscan tu alma.
Porque ciertamente te libraré, y no caerás á cuchillo, sino que tu vida te será por despojo, porque tuviste confianza en mí, dice Jehová.
Mas Ismael hijo de Nethanías se escapó delante de Johanán con ocho hombres, y se fué á los hijos de Ammón.
Antes tomó Johanán hijo de Carea, y todos los oficiales de la gente de guerra, á todo el resto de Judá, que de todas las gentes adonde habían sido echados habían vuelto para morar en tierra de Judá:
Y no pudo sufrir más Jehová á causa de la maldad de vuestras obras, á causa de las abominaciones que habíais hecho: por tanto vuestra tierra fué en asolamiento, y en espanto, y en maldición, hasta no quedar morador, como hoy.
Vivo yo, dice el Rey, cuyo nombre es Jehová de los ejércitos, que como Tabor entre los montes, y como Carmelo en la mar, así vendrá.
Y avergonzaráse Moab de Chêmos, á la manera que la casa de Israel se avergonzó de Beth-el, su confianza.
Miedo y hoyo y lazo sobre ti, oh morador de Moab, dice Jehová.
Y haré encender fuego en el muro de Damasco, y consumirá las casas de Ben-hadad.
Por tanto, así ha dicho Jehová de los ejércitos, Dios de Israel: He aquí que yo visito al rey de Babilonia y á su tierra, como visité al rey de Asiria.
Y enviaré á Babilonia aventadores que la avienten, y vaciarán su tierra; porque serán contra ella de todas partes en el día del mal.
Y los vados fueron tomados, y los carrizos fueron quemados á fuego, y consternáronse los hombres de guerra.
Y será que cuando acabares de leer este libro, le atarás una piedra, y lo echarás en medio del Eufrates:
En el año dieciocho hizo Nabucodonosor trasportar de Jerusalem ochocientas treinta y dos personas:
Cortó con el furor de su ira todo el cuerno de Israel; hizo volver atrás su diestra delante del enemigo; y encendióse en Jacob como llama de fuego que ha devorado en contorno.
Su arco entesó, y púsome como blanco á la saeta.
Nosotros nos hemos rebelado, y fuimos desleales; tú no perdonaste.
Y aumentóse la iniquidad de la hija de mi pueblo más que el pecado de Sodoma, que fué trastornada en un momento, y no asentaron sobre ella compañías.
Cesó el gozo de nuestro corazón; nuestro corro se tornó en luto.
Y debajo de la expansión estaban las alas de ellos derechas la una á la otra; á cada uno dos, y otras dos con que se cubrían sus cuerpos.
Y vine á los trasportados en Telabib, que moraban junto al río de Chebar, y asenté donde ellos estaban asentados, y allí permanecí siete días atónito entre ellos.
Una tercera parte quemarás con fuego en medio de la ciudad, cuando se cumplieren los días del cerco, y tomarás una tercera parte, y herirás con cuchillo alrededor de ella; y una tercera parte esparcirás al viento, y yo desenvainaré espada en pos de ellos.
Y FUÉ á mí palabra de Jehová, diciendo:
Y he aquí que allí estaba la gloria del Dios de Israel, como la visión que yo había visto en el campo.
Y el estruendo de las alas de los querubines se oía hasta el atrio de afuera, como la voz del Dios Omnipotente cuando habla.
Y fué á mí palabra de Jehová, diciendo:
Y dirás al pueblo de la tierra: Así ha dicho el Señor Jehová sobre los moradores de Jerusalem, y sobre la tierra de Israel: Su pan comerán con temor, y con espanto beberán su agua; porque su tierra será asolada de su multitud, por la maldad de todos los que en ella moran.
Romperé asimismo vuestros veletes, y libraré mi pueblo de vuestra mano, y no estarán más en vuestra mano para caza; y sabréis que yo soy Jehová.
Por tanto, así ha dicho el Señor Jehová: Como el palo de la vid entre los maderos del bosque, el cual dí al fuego para que lo consuma, así haré á los moradores de Jerusalem.
Fornicaste también con los hijos de Assur por no haberte hartado; y fornicaste con ellos, y tampoco te hartaste.
Tú has llevado tu enormidad y tus abominaciones, dice Jehová.
¿Qué pensáis vosotros, vosotros que usáis este refrán sobre la tierra de Israel, diciendo: Los padres comieron el agraz, y los dientes de los hijos tienen la dentera?
Que no quiero la muerte del que muere, dice el Señor Jehová; convertíos pues, y viviréis.
Porque desecharon mis derechos, y no anduvieron en mis ordenanzas, y mis sábados profanaron: porque tras sus ídolos iba su corazón.
Hijo del hombre, pon tu rostro hacia el mediodía, y derrama tu palabra hacia la parte austral, y profetiza contra el bosque del campo del mediodía.
Y tú, hijo del hombre, profetiza, y di: Así ha dicho el Señor Jehová sobre los hijos de Ammón, y su oprobio. Dirás pues: La espada, la espada está desenvainada para degollar; acicalada para consumir con resplandor.
Sus sacerdotes violentaron mi ley, y contaminaron mis santuarios: entre lo santo y lo profano no hicieron diferencia, ni distinguieron entre inmundo y limpio; y de mis sábados escondieron sus ojos, y yo era profanado en medio de ellos.
Y pondré mi celo contra ti, y obrarán contigo con furor; quitarte han tu nariz y tus orejas; y lo que te quedare caerá á cuchillo. Ellos tomarán tus hijos y tus hijas, y tu residuo será consumido por el fuego.
Porque su sangre fué en medio de ella: sobre una piedra alisada la puso; no la derramó sobre la tierra para que fuese cubierta con polvo.
A los hijos del oriente contra los hijos de Ammón; y entregaréla por heredad para que no haya más memoria de los hijos de Ammón entre las gentes.
Y tú, hijo del hombre, levanta endechas sobre Tiro.
Cuando tus mercaderías salían de las naves, hartabas muchos pueblos: los reyes de la tierra enriqueciste con la multitud de tus riquezas y de tus contrataciones.
EN el año décimo, en el mesdécimo, á los doce del mes, fué á mí palabra de Jehová, diciendo:
Así ha dicho el Señor Jehová: Haré cesar la multitud de Egipto por mano de Nabucodonosor, rey de Babilonia.
Para que no se eleven en su altura los árboles todos de las aguas, ni levanten su cumbre entre las espesuras, ni en sus ramas se paren por su altura todos los que beben aguas: porque todos serán entregados á muerte, á la tierra baja, en medio de los hijos de los hombres, con los que descienden á la huesa.
Y no yacerán con los fuertes que cayeron de los incircuncisos, los cuales descendieron al sepulcro con sus armas de guerra, y pusieron sus espadas debajo de sus cabezas: mas sus pecados estarán sobre sus huesos, porque fueron terror de fuertes en la tierra de los vivientes.
Por tanto, diles: Así ha dicho el Señor Jehová: ¿Con sangre comeréis, y á vuestros ídolos alzaréis vuestros ojos, y sangre derramaréis, y poseeréis vosotros la tierra?
Yo salvaré á mis ovejas, y nunca más serán en rapiña; y juzgaré entre oveja y oveja.
Por lo cual así ha dicho el Señor Jehová: Yo he alzado mi mano, que las gentes que os están alrededor han de llevar su afrenta.
Así ha dicho el Señor Jehová: Aun seré solicitado de la casa de Israel, para hacerles esto: multiplicarélos de hombres á modo de rebaños.
Y FUÉ á mí palabra de Jehová, diciendo:
Y los moradores de las ciudades de Israel saldrán, y encenderán y quemarán armas, y escudos, y paveses, arcos y saetas, y bastones de mano, y lanzas: y las quemarán en fuego por siete años.
Y la puerta de hacia el oriente tenía tres cámaras de cada parte, todas tres de una medida: también de una medida los portales de cada parte.
Y al lado por de fuera de las gradas, á la entrada de la puerta del norte, había dos mesas; y al otro lado que estaba á la entrada de la puerta, dos mesas.
La altura del altar de madera era de tres codos, y su longitud de dos codos; y sus esquinas, y su superficie, y sus paredes, eran de madera. Y díjome: Esta es la mesa que está delante de Jehová.
Y oí uno que me hablaba desde la casa: y un varón estaba junto á mí.
Así ha dicho el Señor Jehová: Ningún hijo de extranjero, incircunciso de corazón é incircunciso de carne, entrará en mi santuario, de todos los hijos de extranjeros que están entre los hijos de Israel.
Esta tierra tendrá por posesión en Israel, y nunca más mis príncipes oprimirán á mi pueblo: y darán la tierra á la casa de Israel por sus tribus.
Y con él harás todas las mañanas presente de la sexta parte de un epha, y la tercera parte de un hin de aceite para mezclar con la flor de harina: presente para Jehová continuamente por estatuto perpetuo.
Y al lado del occidente la gran mar será el término hasta en derecho para venir á Hamath: este será el lado del occidente.
Y junto al término de Zabulón, desde la parte del oriente hasta la parte de la mar, Gad, otra.
Y mandó el rey llamar magos, astrólogos, y encantadores, y Caldeos, para que mostrasen al rey sus sueños. Vinieron pues, y se presentaron delante del rey.
La cabeza de esta imagen era de fino oro; sus pechos y sus brazos, de plata; su vientre y sus muslos, de metal;
Entonces Nabucodonosor dijo con ira y con enojo que trajesen á Sadrach, Mesach, y Abed-nego. Al punto fueron traídos estos varones delante del rey.
Y clamaba fuertemente y decía así: Cortad el árbol, y desmochad sus ramas, derribad su copa, y derramad su fruto: váyanse las bestias que están debajo de él, y las aves de sus ramas.
El rey clamó en alta voz que hiciesen venir magos, Caldeos, y adivinos. Habló el rey, y dijo á los sabios de Babilonia: Cualquiera que leyere esta escritura, y me mostrare su declaración, será vestido de púrpura, y tendrá collar de oro á su cuello; y en el reino se enseñoreará el tercero.
Entonces estos gobernadores y presidentes se juntaron delante del rey, y le dijeron así: Rey Darío, para siempre vive:
Estando yo contemplando los cuernos, he aquí que otro cuerno pequeño subía entre ellos, y delante de él fueron arrancados tres cuernos de los primeros; y he aquí, en este cuerno había ojos como ojos de hombre, y una boca que hablaba grandezas.
Aun contra el príncipe de la fortaleza se engrandeció, y por él fué quitado el continuo sacrificio, y el lugar de su santuario fué echado por tierra.
Veló por tanto Jehová sobre el mal, y trájolo sobre nosotros; porque justo es Jehová nuestro Dios en todas sus obras que hizo, porque no obedecimos á su voz.
¿Cómo pues podrá el siervo de mi señor hablar con este mi señor? porque al instante me faltó la fuerza, y no me ha quedado aliento.
Y el corazón de estos dos reyes será para hacer mal, y en una misma mesa tratarán mentira: mas no servirá de nada, porque el plazo aun no es llegado.
Bienaventurado el que esperare, y llegare hasta mil trescientos treinta y cinco días.
Y haré por ellos concierto en aquel tiempo con las bestias del campo, y con las aves del cielo, y con las serpientes de la tierra: y quebraré arco, y espada, y batalla de la tierra, y harélos dormir seguros.
Y haciendo víctimas han bajado hasta el profundo: por tanto yo seré la corrección de todos ellos.
Porque aplicaron su corazón, semejante á un horno, á sus artificios: toda la noche duerme su hornero; á la mañana está encendido como llama de fuego.
Porque, he aquí se fueron ellos á causa de la destrucción: Egipto los recogerá, Memphis los enterrará: espino poseerá por heredad lo deseable de su plata, ortiga crecerá en sus moradas.
Con cuerdas humanas los traje, con cuerdas de amor: y fuí para ellos como los que alzan el yugo de sobre sus mejillas, y llegué hacia él la comida.
Ephraim dirá: ¿Qué más tendré ya con los ídolos? Yo lo oiré, y miraré; yo seré á él como la haya verde: de mí será hallado tu fruto.
Irán por la ciudad, correrán por el muro, subirán por las casas, entrarán por las ventanas á manera de ladrones.
He aquí los levantaré yo del lugar donde los vendisteis, y volveré vuestra paga sobre vuestra cabeza:
Y meteré fuego en Moab, y consumirá los palacios de Chêrioth: y morirá Moab en alboroto, en estrépito y sonido de trompeta.
OID esta palabra, vacas de Basán, que estáis en el monte de Samaria, que oprimís los pobres, que quebrantáis los menesterosos, que decís á sus señores: Traed, y beberemos.
¡Ay de los que desean el día de Jehová! ¿para qué queréis este día de Jehová? Será de tinieblas, y no luz:
Jehová entonces me dijo: ¿Qué ves, Amós? Y dije: Una plomada de albañil. Y el Señor dijo: He aquí, yo pongo plomada de albañil en medio de mi pueblo Israel: no le pasaré más:
Hijos de Israel, ¿no me sois vosotros, dice Jehová, como hijos de Etiopes? ¿no hice yo subir á Israel de la tierra de Egipto, y á los Palestinos de Caphtor, y de Chîr á los Arameos?
PALABRA de Jehová que fué á Miqueas de Morasti en días de Jotham, Achâz, y Ezechîas, reyes de Judá: lo que vió sobre Samaria y Jerusalem.
Que comen asimismo la carne de mi pueblo, y les desuellan su piel de sobre ellos, y les quebrantan sus huesos y los rompen, como para el caldero, y como carnes en olla.
Asimismo será el resto de Jacob entre las gentes, en medio de muchos pueblos, como el león entre las bestias de la montaña, como el cachorro del león entre las manadas de las ovejas, el cual si pasare, y hollare, y arrebatare, no hay quien escape.
Yo empero á Jehová esperaré, esperaré al Dios de mi salud: el Dios mío me oirá.
Porque Jehová restituirá la gloria de Jacob como la gloria de Israel; porque vaciadores los vaciaron, y estropearon sus mugrones.
LA carga que vió Habacuc profeta.
Porque la tierra será llena de conocimiento de la gloria de Jehová, como las aguas cubren la mar.
Y á los que se inclinan sobre los terrados al ejército del cielo; y á los que se inclinan jurando por Jehová y jurando por su rey;
Sus príncipes en medio de ella son leones bramadores: sus jueces, lobos de tarde que no dejan hueso para la mañana:
Entonces Haggeo, enviado de Jehová, habló por mandado de Jehová, al pueblo, diciendo: Yo soy con vosotros, dice Jehová.
Vuestros padres, ¿dónde están? y los profetas ¿han de vivir para siempre?
Y dijo Jehová á Satán: Jehová te reprenda, oh Satán; Jehová, que ha escogido á Jerusalem, te reprenda. ¿No es éste tizón arrebatado del incendio?
Y él dijo: Esta es la Maldad; y echóla dentro del epha, y echó la masa de plomo en su boca.
Y pusieron su corazón como diamante, para no oir la ley ni las palabras que Jehová de los ejércitos enviaba por su espíritu, por mano de los profetas primeros: fué, por tanto, hecho grande castigo por Jehová de los ejércitos.
Ascalón verá, y temerá; Gaza también, y se dolerá en gran manera: asimismo Ecrón, porque su esperanza será confundida; y de Gaza perecerá el rey, y Ascalón no será habitada.
Apacenté pues las ovejas de la matanza, es á saber, los pobres del rebaño. Y me tomé dos cayados; al uno puse por nombre Suavidad, y al otro Ataduras; y apacenté las ovejas.
Y le preguntarán: ¿Qué heridas son éstas en tus manos? Y él responderá: Con ellas fuí herido en casa de mis amigos.
El hijo honra al padre, y el siervo á su señor: si pues soy yo padre, ¿qué es de mi honra? y si soy señor, ¿qué es de mi temor?, dice Jehová de los ejércitos á vosotros, oh sacerdotes, que menospreciáis mi nombre. Y decís: ¿En qué hemos menospreciado tu nombre?
Porque yo Jehová, no me mudo; y así vosotros, hijos de Jacob, no habéis sido consumidos.
Y después de la transmigración de Babilonia, Jechônías engendró á Salathiel: y Salathiel engendró á Zorobabel:
Entonces fué cumplido lo que se había dicho por el profeta Jeremías, que dijo:
Otra vez le pasa el diablo á un monte muy alto, y le muestra todos los reinos del mundo, y su gloria,
Vosotros sois la sal de la tierra: y si la sal se desvaneciere ¿con qué será salada? no vale más para nada, sino para ser echada fuera y hollada de los hombres.
Oísteis que fué dicho: Amarás á tu prójimo, y aborrecerás á tu enemigo.
Por tanto os digo: No os congojéis por vuestra vida, qué habéis de comer, ó qué habéis de beber; ni por vuestro cuerpo, qué habéis de vestir: ¿no es la vida más que el alimento, y el cuerpo que el vestido?
Muchos me dirán en aquel día: Señor, Señor, ¿no profetizamos en tu nombre, y en tu nombre lanzamos demonios, y en tu nombre hicimos muchos milagros?
Y entrando él en el barco, sus discípulos le siguieron.
Y se levantó Jesús, y le siguió, y sus discípulos.
Y entrando en la casa, saludadla.
Y cualquiera que diere á uno de estos pequeñitos un vaso de agua fría solamente, en nombre de discípulo, de cierto os digo, que no perderá su recompensa.
Porque mi yugo es fácil, y ligera mi carga.
Por tanto os digo: Todo pecado y blasfemia será perdonado á los hombres: mas la blasfemia contra el Espíritu no será perdonada á los hombres.
Y él respondiendo, les dijo: Por que á vosotros es concedido saber los misterios del reino de los cielos; mas á ellos no es concedido.
Enviará el Hijo del hombre sus ángeles, y cogerán de su reino todos los escándalos, y los que hacen iniquidad,
Y saliendo Jesús, vió un gran gentío, y tuvo compasión de ellos, y sanó á los que de ellos había enfermos.
Este pueblo de labios me honra; mas su corazón lejos está de mí.
Y eran los que habían comido, cuatro mil hombres, sin las mujeres y los niños.
Y DESPUÉS de seis días, Jesús toma á Pedro, y á Jacobo, y á Juan su hermano, y los lleva aparte á un monte alto:
Y cualquiera que recibiere á un tal niño en mi nombre, á mí recibe.
Así también hará con vosotros mi Padre celestial, si no perdonareis de vuestros corazones cada uno á su hermano sus ofensas.
Mas muchos primeros serán postreros, y postreros primeros.
Y la gente les reñía para que callasen; mas ellos clamaban más, diciendo: Señor, Hijo de David, ten misericordia de nosotros.
Y respondiendo á Jesús, dijeron: No sabemos. Y él también les dijo: Ni yo os digo con qué autoridad hago esto.
Y entró el rey para ver los convidados, y vió allí un hombre no vestido de boda.
Diciendo: ¿Qué os parece del Cristo? ¿de quién es Hijo? Dícenle: De David.
¡Fariseo ciego, limpia primero lo de dentro del vaso y del plato, para que también lo de fuera se haga limpio!
Y el que sobre el terrado, no descienda á tomar algo de su casa;
De cierto os digo, que sobre todos sus bienes le pondrá.
Por tanto te convenía dar mi dinero á los banqueros, y viniendo yo, hubiera recibido lo que es mío con usura.
Porque siempre tendréis pobres con vosotros, mas á mí no siempre me tendréis.
Velad y orad, para que no entréis en tentación: el espíritu á la verdad está presto, mas la carne enferma.
Y negó otra vez con juramento: No conozco al hombre.
Entonces los soldados del presidente llevaron á Jesús al pretorio, y juntaron á él toda la cuadrilla;
Y como fué la tarde del día, vino un hombre rico de Arimatea, llamado José, el cual también había sido discípulo de Jesús.
Como nos lo enseñaron los que desde el principio lo vieron por sus ojos, y fueron ministros de la palabra;
Este será grande, y será llamado Hijo del Altísimo: y le dará el Señor Dios el trono de David su padre:
Y hablaron por señas á su padre, cómo le quería llamar.
Y esto os será por señal: hallaréis al niño envuelto en pañales, echado en un pesebre.
Y acabados los días, volviendo ellos, se quedó el niño Jesús en Jerusalem, sin saberlo José y su madre.
Y aconteció que, como todo el pueblo se bautizaba, también Jesús fué bautizado; y orando, el cielo se abrió,
Y acabada toda tentación, el diablo se fué de él por un tiempo.
Y predicaba en las sinagogas de Galilea.
Y los escribas y los Fariseos murmuraban contra sus discípulos, diciendo: ¿Por qué coméis y bebéis con los publicanos y pecadores?
Bienaventurados los que ahora tenéis hambre; porque seréis saciados. Bienaventurados los que ahora lloráis, porque reiréis.
Y como oyóhablarde Jesús, envió á él los ancianos de los Judíos, rogándole que viniese y librase á su siervo.
Porque vino Juan el Bautista, que ni comía pan, ni bebía vino, y decís: Demonio tiene.
Y los de sobre la piedra, son los que habiendo oído, reciben la palabra con gozo; mas éstos no tienen raíces; que á tiempo creen, y en el tiempo de la tentación se apartan.
Llegándose por las espaldas, tocó el borde de su vestido; y luego se estancó el flujo de su sangre.
Y aconteció que estando él solo orando, estaban con él los discípulos; y les preguntó diciendo: ¿Quién dicen las gentes que soy?
Y les dice: Cualquiera que recibiere este niño en mi nombre, á mí recibe; y cualquiera que me recibiere á mí, recibe al que me envió; porque el que fuere el menor entre todos vosotros, éste será el grande.
El que á vosotros oye, á mí oye; y el que á vosotros desecha, á mí desecha; y el que á mí desecha, desecha al que me envió.
Díjoles también: ¿Quién de vosotros tendrá un amigo, é irá á él á media noche, y le dirá: Amigo, préstame tres panes,
Mira pues, si la lumbre que en ti hay, es tinieblas.
Y cuando os trajeren á las sinagogas, y á los magistrados y potestades, no estéis solícitos cómo ó qué hayáis de responder, ó qué hayáis de decir;
Y dijo el Señor: ¿Quién es el mayordomo fiel y prudente, al cual el señor pondrá sobre su familia, para que á tiempo les dé su ración?
Y puso las manos sobre ella; y luego se enderezó, y glorificaba á Dios.
Cuando fueres convidado de alguno á bodas, no te sientes en el primer lugar, no sea que otro más honrado que tú esté por él convidado,
¿Qué hombre de vosotros, teniendo cien ovejas, si perdiere una de ellas, no deja las noventa y nueve en el desierto, y va á la que se perdió, hasta que la halle?
Y le llamó, y le dijo: ¿Qué es esto que oigo de ti? Da cuenta de tu mayordomía, porque ya no podrás más ser mayordomo.
Y Á SUS discípulos dice: Imposible es que no vengan escándalos; mas ¡ay de aquél por quien vienen!
En aquel día, el que estuviere en el terrado, y sus alhajas en casa, no descienda á tomarlas: y el que en el campo, asimismo no vuelva atrás.
Y los que lo oían, dijeron: ¿Y quién podrá ser salvo?
Mas llamados diez siervos suyos, les dió diez minas, y díjoles: Negociad entre tanto que vengo.
Porque vendrán días sobre ti, que tus enemigos te cercarán con baluarte, y te pondrán cerco, y de todas partes te pondrán en estrecho,
Y no pudieron reprender sus palabras delante del pueblo: antes maravillados de su respuesta, callaron.
Empero cuando oyereis guerras y sediciones, no os espantéis; porque es necesario que estas cosas acontezcan primero: mas no luego será el fin.
Y ESTABA cerca el día de la fiesta de los ázimos, que se llama la Pascua.
Mas yo he rogado por ti que tu fe no falte: y tú, una vez vuelto, confirma á tus hermanos.
Y saliendo fuera Pedro, lloró amargamente.
Pero ellos volvieron á dar voces, diciendo: Crucifícale, crucifícale.
(El cual no había consentido en el consejo ni en los hechos de ellos), de Arimatea, ciudad de la Judea, el cual también esperaba el reino de Dios;
¿No era necesario que el Cristo padeciera estas cosas, y que entrara en su gloria?
Todas las cosas por él fueron hechas; y sin él nada de lo que es hecho, fué hecho.
Y yo no le conocía; mas el que me envió á bautizar con agua, aquél me dijo: Sobre quien vieres descender el Espíritu, y que reposa sobre él, éste es el que bautiza con Espíritu Santo.
Y estaba cerca la Pascua de los Judíos; y subió Jesús á Jerusalem.
El que en él cree, no es condenado; mas el que no cree, ya es condenado, porque no creyó en el nombre del unigénito Hijo de Dios.
¿Eres tú mayor que nuestro padre Jacob, que nos dió este pozo, del cual él bebió, y sus hijos, y sus ganados?
Y dos días después, salió de allí, y fuése á Galilea.
Respondió entonces Jesús, y díjoles: De cierto, de cierto os digo: No puede el Hijo hacer nada de sí mismo, sino lo que viere hacer al Padre: porque todo lo que él hace, esto también hace el Hijo juntamente.
Y seguíale grande multitud, porque veían sus señales que hacía en los enfermos.
Porque el pan de Dios es aquel que descendió del cielo y da vida al mundo.
El espíritu es el que da vida; la carne nada aprovecha: las palabras que yo os he hablado, son espíritu, y son vida.
Cierto, Moisés os dió la circuncisión (no porque sea de Moisés, mas de los padres); y en sábado circuncidáis al hombre.
Respondieron y dijéronle: ¿Eres tú también Galileo? Escudriña y ve que de Galilea nunca se levantó profeta.
Hablando él estas cosas, muchos creyeron en él.
Y PASANDOJesús, vió un hombre ciego desde su nacimiento.
Y sabemos que Dios no oye á los pecadores: mas si alguno es temeroso de Dios, y hace su voluntad, á éste oye.
Decían otros: Estas palabras no son de endemoniado: ¿puede el demonio abrir los ojos de los ciegos?
Respondió Jesús: ¿No tiene el día doce horas? El que anduviere de día, no tropieza, porque ve la luz de este mundo.
Dice Jesús: Quitad la piedra. Marta, la hermana del que se había muerto, le dice: Señor, hiede ya, que es de cuatro días.
Tomaron ramos de palmas, y salieron á recibirle, y clamaban: ¡Hosanna, Bendito el que viene en el nombre del Señor, el Rey de Israel!
Porque amaban más la gloria de los hombres que la gloria de Dios.
Y uno de sus discípulos, al cual Jesús amaba, estaba recostado en el seno de Jesús.
Si me amáis, guardad mis mandamientos;
Ya no os llamaré siervos, porque el siervo no sabe lo que hace su señor: mas os he llamado amigos, porque todas las cosas que oí de mi Padre, os he hecho notorias.
Decían pues: ¿Qué es esto que dice: Un poquito? No entendemos lo que habla.
No ruego que los quites del mundo, sino que los guardes del mal.
Jesús le respondió: Yo manifiestamente he hablado al mundo: yo siempre he enseñado en la sinagoga y en el templo, donde se juntan todos los Judíos, y nada he hablado en oculto.
Entonces dícele Pilato: ¿A mí no me hablas? ¿no sabes que tengo potestad para crucificarte, y que tengo potestad para soltarte?
Tomaron pues el cuerpo de Jesús, y envolviéronlo en lienzos con especias, como es costumbre de los Judíos sepultar.
Dícele Jesús: Porque me has visto, Tomás, creiste: bienaventurados los que no vieron y creyeron.
A los cuales, después de haber padecido, se presentó vivo con muchas pruebas indubitables, apareciéndoles por cuarenta días, y hablándoles del reino de Dios.
Y estaban atónitos y maravillados, diciendo: He aquí ¿no son Galileos todos estos que hablan?
Entonces oído esto, fueron compungidos de corazón, y dijeron á Pedro y á los otros apóstoles: Varones hermanos, ¿qué haremos?
Al cual de cierto es menester que el cielo tenga hasta los tiempos de la restauración de todas las cosas, que habló Dios por boca de sus santos profetas que han sido desde el siglo.
Que por boca de David, tu siervo, dijiste: ¿Por qué han bramado las gentes, y los pueblos han pensado cosas vanas?
Y echaron mano á los apóstoles, y pusiéronlos en la cárcel pública.
Y crecía la palabra del Señor, y el número de los discípulos se multiplicaba mucho en Jerusalem: también una gran multitud de los sacerdotes obedecía á la fe.
Y fué enseñado Moisés en toda la sabiduría de los egipcios; y era poderoso en sus dichos y hechos.
¿A cuál de los profetas no persiguieron vuestros padres? y mataron á los que antes anunciaron la venida del Justo, del cual vosotros ahora habéis sido entregadores y matadores;
Porque en hiel de amargura y en prisión de maldad veo que estás.
Y aun aquí tiene facultad de los príncipes de los sacerdotes de prender á todos los que invocan tu nombre.
Y HABÍA un varón en Cesarea llamado Cornelio, centurión de la compañía que se llamaba la Italiana,
Envía pues á Joppe, y haz venir á un Simón, que tiene por sobrenombre Pedro; éste posa en casa de Simón, curtidor, junto á la mar; el cual venido, te hablará.
El cual te hablará palabras por las cuales serás salvo tú, y toda tu casa.
La cual como conoció la voz de Pedro, de gozo no abrió el postigo, sino corriendo adentro, dió nueva de que Pedro estaba al postigo.
Y destruyendo siete naciones en la tierra de Canaán, les repartió por suerte la tierra de ellas.
Mas los Judíos concitaron mujeres pías y honestas, y á los principales de la ciudad, y levantaron persecución contra Pablo y Bernabé, y los echaron de sus términos.
Y se quedaron allí mucho tiempo con los discípulos.
Ellos entonces enviados, descendieron á Antioquía; y juntando la multitud, dieron la carta.
Y predican ritos, los cuales no nos es lícito recibir ni hacer, pues somos Romanos.
Y fueron éstos más nobles que los que estaban en Tesalónica, pues recibieron la palabra con toda solicitud, escudriñando cada día las Escrituras, si estas cosas eran así.
Y partiendo de allí, entró en casa de uno llamado Justo, temeroso de Dios, la casa del cual estaba junto á la sinagoga.
Y esto fué por espacio de dos años; de manera que todos los que habitaban en Asia, Judíos y Griegos, oyeron la palabra del Señor Jesús.
Porque peligro hay de que seamos argüidos de sedición por hoy, no habiendo ninguna causa por la cual podamos dar razón de este concurso. Y habiendo dicho esto, despidió la concurrencia.
Y de vosotros mismos se levantarán hombres que hablen cosas perversas, para llevar discípulos tras sí.
¿Qué hay pues? La multitud se reunirá de cierto: porque oirán que has venido.
Viniendo á mí, y acercándose, me dijo: Hermano Saulo, recibe la vista. Y yo en aquella hora le miré.
Y eran más de cuarenta los que habían hecho esta conjuración;
Y contendían también los Judíos, diciendo ser así estas cosas.
Y pasados algunos días, el rey Agripa y Bernice vinieron á Cesarea á saludar á Festo.
Mas levántate, y ponte sobre tus pies; porque para esto te he aparecido, para ponerte por ministro y testigo de las cosas que has visto, y de aquellas en que apareceré á ti:
Mas no mucho después dió en ella un viento repentino, que se llama Euroclidón.
Y CUANDO escapamos, entonces supimos que la isla se llamaba Melita.
Predicando el reino de Dios y enseñando lo que es del Señor Jesucristo con toda libertad, sin impedimento.
Murmuradores, detractores, aborrecedores de Dios, injuriosos, soberbios, altivos, inventores de males, desobedientes á los padres,
Porque no es Judío el que lo es en manifiesto; ni la circuncisión es la que es en manifiesto en la carne:
Porque uno es Dios, el cual justificará por la fe la circuncisión, y por medio de la fe la incircuncisión.
Y la paciencia, prueba; y la prueba, esperanza;
Ni tampoco presentéis vuestros miembros al pecado por instrumentos de iniquidad; antes presentaos á Dios como vivos de los muertos, y vuestros miembros á Dios por instrumentos de justicia.
Así que, queriendo yo hacer el bien, hallo esta ley: Que el mal está en mí.
Y asimismo también el Espíritu ayuda nuestra flaqueza: porque qué hemos de pedir como conviene, no lo sabemos; sino que el mismo Espíritu pide por nosotros con gemidos indecibles.
Porque la Escritura dice de Faraón: Que para esto mismo te he levantado, para mostrar en ti mi potencia, y que mi nombre sea anunciado por toda la tierra.
¿Y cómo predicarán si no fueren enviados? Como está escrito: ¡Cuán hermosos son los pies de los que anuncian el evangelio de la paz, de los que anuncian el evangelio de los bienes!
Porque si tú eres cortado del natural acebuche, y contra natura fuiste ingerido en la buena oliva, ¿cuánto más éstos, que son las ramas naturales, serán ingeridos en su oliva?
Si se puede hacer, cuanto está en vosotros, tened paz con todos los hombres.
Yo sé, y confío en el Señor Jesús, que de suyo nada hay inmundo: mas á aquel que piensa alguna cosa ser inmunda, para él es inmunda.
Por lo cual aun he sido impedido muchas veces de venir á vosotros.
Porque vuestra obediencia ha venido á ser notoria á todos; así que me gozo de vosotros; mas quiero que seáis sabios en el bien, y simples en el mal.
Porque lo loco de Dios es más sabio que los hombres; y lo flaco de Dios es más fuerte que los hombres.
Porque nosotros, coadjutores somos de Dios; y vosotros labranza de Dios sois, edificio de Dios sois.
Por tanto, os ruego que me imitéis.
Todas las cosas me son lícitas, mas no todas convienen: todas las cosas me son lícitas, mas yo no me meteré debajo de potestad de nada.
Por precio sois comprados; no os hagáis siervos de los hombres.
Por lo cual, si la comida es á mi hermano ocasión de caer, jamás comeré carne por no escandalizar á mi hermano.
Y todos comieron la misma vianda espiritual;
SED imitadores de mí, así como yo de Cristo.
Que si nos examinásemos á nosotros mismos, cierto no seríamos juzgados.
Pues vosotros sois el cuerpo de Cristo, y miembros en parte.
Por lo cual, el que habla lengua extraña, pida que la interprete.
Y que fué sepultado, y que resucitó al tercer día, conforme á las Escrituras;
Velad debidamente, y no pequéis; porque algunos no conocen á Dios: para vergüenza vuestra hablo.
Y podrá ser que me quede con vosotros, ó invernaré también, para que vosotros me llevéis á donde hubiere de ir.
Porque no os escribimos otras cosas de las que leéis, ó también conocéis: y espero que aun hasta el fin las conoceréis:
Nuestras letras sois vosotros, escritas en nuestros corazones, sabidas y leídas de todos los hombres;
Estando ciertos que el que levantó al Señor Jesús, á nosotros también nos levantará por Jesús, y nos pondrá con vosotros.
En castidad, en ciencia, en longanimidad, en bondad, en Espíritu Santo, en amor no fingido;
Que en grande prueba de tribulación, la abundancia de su gozo y su profunda pobreza abundaron en riquezas de su bondad.
Y poderoso es Dios para hacer que abunde en vosotros toda gracia; á fin de que, teniendo siempre en todas las cosas todo lo que basta, abundéis para toda buena obra:
Cierto pienso que en nada he sido inferior á aquellos grandes apóstoles.
Y conozco tal hombre, (si en el cuerpo, ó fuera del cuerpo, no lo sé: Dios lo sabe,)
Saludaos los unos á los otros con ósculo santo. Todos los santos os saludan.
Empero de aquellos que parecían ser algo (cuáles hayan sido algún tiempo, no tengo que ver; Dios no acepta apariencia de hombre), á mí ciertamente los que parecían ser algo, nada me dieron.
A Abraham fueron hechas las promesas, y á su simiente. No dice: Y á las simientes, como de muchos; sino como de uno: Y á tu simiente, la cual es Cristo.
Tienen celos de vosotros, pero no bien: antes os quieren echar fuera para que vosotros los celéis á ellos.
Digo pues: Andad en el Espíritu, y no satisfagáis la concupiscencia de la carne.
Bendito el Dios y Padre del Señor nuestro Jesucristo, el cual nos bendijo con toda bendición espiritual enlugarescelestiales en Cristo:
Porque somos hechura suya, criados en Cristo Jesús para buenas obras, las cuales Dios preparó para que anduviésemos en ellas.
Podáis bien comprender con todos los santos cuál sea la anchura y la longura y la profundidad y la altura,
El que hurtaba, no hurte más; antes trabaje, obrando con sus manos lo que es bueno, para que tenga de qué dar al que padeciere necesidad.
Para santificarla limpiándola en el lavacro del agua por la palabra,
Paz sea á los hermanos y amor con fe, de Dios Padre y del Señor Jesucristo.
Porque á vosotros es concedido por Cristo, no sólo que creáis en él, sino también que padezcáis por él,
Porque por la obra de Cristo estuvo cercano á la muerte, poniendo su vida para suplir vuestra falta en mi servicio.
Lo que aprendisteis y recibisteis y oísteis y visteis en mí, esto haced; y el Dios de paz será con vosotros.
Porque por él fueron criadas todas las cosas que están en los cielos, y que están en la tierra, visibles é invisibles; sean tronos, sean dominios, sean principados, sean potestades; todo fué criado por él y para él.
Nadie os prive de vuestro premio, afectando humildad y culto á los ángeles, metiéndose en lo que no ha visto, vanamente hinchado en el sentido de su propia carne,
Mas el que hace injuria, recibirá la injuria que hiciere; que no hay acepción de personas.
Pues aun habiendo padecido antes, y sido afrentados en Filipos, como sabéis, tuvimos denuedo en Dios nuestro para anunciaros el evangelio de Dios con gran combate.
Para que sean confirmados vuestros corazones en santidad, irreprensibles delante de Dios y nuestro Padre, para la venida de nuestro Señor Jesucristo con todos sus santos.
Y os rogamos, hermanos, que reconozcáis á los que trabajan entre vosotros, y os presiden en el Señor, y os amonestan:
Que no os mováis fácilmente de vuestro sentimiento, ni os conturbéis ni por espíritu, ni por palabra, ni por carta como nuestra, como que el día del Señor esté cerca.
Mas no lo tengáis como á enemigo, sino amonestadle como á hermano.
Quiero, pues, que los hombres oren en todo lugar, levantando manos limpias, sin ira ni contienda.
Mas las fábulas profanas y de viejas desecha, y ejercítate para la piedad.
Te requiero delante de Dios y del Señor Jesucristo, y de sus ángeles escogidos, que guardes estas cosas sin perjuicio de nadie, que nada hagas inclinándote á la una parte.
Por lo cual te aconsejo que despiertes el don de Dios, que está en ti por la imposición de mis manos.
Que se han descaminado de la verdad, diciendo que la resurrección es ya hecha, y trastornan la fe de algunos.
Pero tú vela en todo, soporta las aflicciones, haz la obra de evangelista, cumple tu ministerio.
Todas las cosas son limpias á los limpios; mas á los contaminados é infieles nada es limpio: antes su alma y conciencia están contaminadas.
Y aprendan asimismo los nuestros á gobernarse en buenas obras para los usos necesarios, para que no sean sin fruto.
Hecho tanto más excelente que los ángeles, cuanto alcanzó por herencia más excelente nombre que ellos.
El cual es fiel al que le constituyó, como también lo fué Moisés sobre toda su casa.
Por tanto, teniendo un gran Pontífice, que penetró los cielos, Jesús el Hijo de Dios, retengamos nuestra profesión.
Diciendo: De cierto te bendeciré bendiciendo, y multiplicando te multiplicaré.
Mas éste, por cuanto permanece para siempre, tiene un sacerdocio inmutable:
¿Cuánto más la sangre de Cristo, el cual por el Espíritu eterno se ofreció á sí mismo sin mancha á Dios, limpiará vuestras conciencias de las obras de muerte para que sirváis al Dios vivo?
Y este es el pacto que haré con ellos después de aquellos días, dice el Señor: Daré mis leyes en sus corazones, y en sus almas las escribiré;
Por la fe Noé, habiendo recibido respuesta de cosas que aun no se veían, con temor aparejó el arca en que su casa se salvase: por la cual fe condenó al mundo, y fué hecho heredero de la justicia que es por la fe.
De los cuales el mundo no era digno; perdidos por los desiertos, por los montes, por las cuevas y por las cavernas de la tierra.
Así que, tomando el reino inmóvil, retengamos la gracia por la cual sirvamos á Dios agradándole con temor y reverencia;
Para una herencia incorruptible, y que no puede contaminarse, ni marchitarse, reservada en los cielos
Vosotros, que en el tiempo pasado no erais pueblo, mas ahora sois pueblo de Dios; que en el tiempo pasado no habíais alcanzado misericordia, mas ahora habéis alcanzado misericordia.
Sino santificad al Señor Dios en vuestros corazones, y estad siempre aparejados para responder con mansedumbre y reverencia á cada uno que os demande razón de la esperanza que hay en vosotros:
Y cuando apareciere el Príncipe de los pastores, vosotros recibiréis la corona incorruptible de gloria.
Entendiendo primero esto, que ninguna profecía de la Escritura es de particular interpretación;
Mas, oh amados, no ignoréis esta una cosa: que un día delante del Señor es como mil años y mil años como un día.
Porque ellos partieron por amor de su nombre, no tomando nada de los Gentiles.
Mas haced salvos á los otros por temor, arrebatándolos del fuego; aborreciendo aun la ropa que es contaminada de la carne.
Yo sé tus obras, y tu tribulación, y tu pobreza (pero tú eres rico), y la blasfemia de los que se dicen ser Judíos, y no lo son, mas son sinagoga de Satanás.
Porque has guardado la palabra de mi paciencia, yo también te guardaré de la hora de la tentación que ha de venir en todo el mundo, para probar á los que moran en la tierra.
Y él vino, y tomó el libro de la mano derecha de aquel que estaba sentado en el trono.
De la tribu de Simeón, doce mil señalados. De la tribu de Leví, doce mil señalados. De la tribu de Issachâr, doce mil señalados.
Y el parecer de las langostas era semejante á caballos aparejados para la guerra: y sobre sus cabezasteníancomo coronas semejantes al oro; y sus caras como caras de hombres.
Y si alguno les quisiere dañar, sale fuego de la boca de ellos, y devora á sus enemigos: y si alguno les quisiere hacer daño, es necesario que él sea así muerto.
Y la tierra ayudó á la mujer, y la tierra abrió su boca, y sorbió el río que había echado el dragón de su boca.
Aquí está la paciencia de los santos; aquí están los que guardan los mandamientos de Dios, y la fe de Jesús.
Porque son espíritus de demonios, que hacen señales, para ir á los reyes de la tierra y de todo el mundo, para congregarlos para la batalla de aquel gran día del Dios Todopoderoso.
Porque sus pecados han llegado hasta el cielo, y Dios se ha acordado de sus maldades.
Y sus ojos eran como llama de fuego, y había en su cabeza muchas diademas; y tenía un nombre escrito que ninguno entendía sino él mismo.
Y díjome: Hecho es. Yo soy Alpha y Omega, el principio y el fin. Al que tuviere sed, yo le daré de la fuente del agua de vida gratuitamente.
Y él me dijo: Mira que no lo hagas: porque yo soy siervo contigo, y con tus hermanos los profetas, y con los que guardan las palabras de este libro. Adora á Dios.
